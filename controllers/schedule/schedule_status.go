package schedule

import (
	"errors"
	"fmt"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/target"
)

// Evaluation is one Schedule at one instant.
type Evaluation struct {
	// Window is where the schedule stands (zero when Err is set).
	Window Window
	// Matching are the names of the clusters it holds, sorted.
	Matching []string
	// Err is the first invalid field, an outcome.Stall naming the Schedule
	// and the field; an invalid Schedule holds no cluster.
	Err error
}

// Evaluate reads s at now against the clusters of its namespace.
func Evaluate(s *fleet.Schedule, clusters []*target.ClusterInfo, now time.Time) Evaluation {
	spec, err := Parse(s.Spec.Schedule, s.Spec.Duration.Duration, s.Spec.Location, now)
	if err == nil {
		var matchers []*target.Criteria
		for i, t := range s.Spec.Targets.Clusters {
			m, cerr := target.CompileCriteria(t.ClusterName, t.ClusterGroup, t.ClusterSelector, t.ClusterGroupSelector)
			if cerr != nil {
				err = &FieldError{Field: fmt.Sprintf("spec.targets.clusters[%d]", i), Reason: fleet.ReasonInvalidSelector, Err: cerr}
				break
			}
			matchers = append(matchers, m)
		}
		if err == nil {
			ev := Evaluation{Window: spec.At(now), Matching: []string{}}
			for _, c := range clusters {
				if slices.ContainsFunc(matchers, func(m *target.Criteria) bool { return m.Matches(c) }) {
					ev.Matching = append(ev.Matching, c.Name)
				}
			}
			slices.Sort(ev.Matching)
			return ev
		}
	}
	reason := fleet.ReasonError
	var fe *FieldError
	if errors.As(err, &fe) {
		reason = fe.Reason
	}
	return Evaluation{Err: outcome.Stall(reason, fmt.Errorf("schedule %s/%s: %w", s.Namespace, s.Name, err))}
}

// ComputeStatus sets s's status from ev, all but Ready (which
// outcome.Compute sets from ev.Err).
func ComputeStatus(s *fleet.Schedule, ev Evaluation) {
	s.Status.ObservedGeneration = s.Generation
	s.Status.Active = ev.Err == nil && ev.Window.Active
	s.Status.NextStartTime = metav1.Time{}
	if ev.Err == nil && !ev.Window.NextStart.IsZero() {
		s.Status.NextStartTime = metav1.NewTime(ev.Window.NextStart.Truncate(time.Second))
	}
	s.Status.MatchingClusters = nil
	if ev.Err == nil && len(ev.Matching) > 0 {
		s.Status.MatchingClusters = ev.Matching
	}
}

// ClusterFields are the Cluster status fields this controller owns. Both
// are always sent, false too: a release is an explicit false under this
// controller's ownership rather than a field dropped from the applied
// configuration (an apply of an empty status left scheduled true once
// the last Schedule of a namespace was deleted).
type ClusterFields struct {
	Scheduled      bool `json:"scheduled"`
	ActiveSchedule bool `json:"activeSchedule"`
}

// ClusterStatus is what the valid Schedules of a namespace make of each
// cluster: held when any of them matches it, open when one of those has its
// window open.
func ClusterStatus(evs []Evaluation) map[string]ClusterFields {
	out := map[string]ClusterFields{}
	for _, ev := range evs {
		if ev.Err != nil {
			continue
		}
		for _, name := range ev.Matching {
			f := out[name]
			f.Scheduled = true
			f.ActiveSchedule = f.ActiveSchedule || ev.Window.Active
			out[name] = f
		}
	}
	return out
}

// NextChange is the soonest instant at which one of the valid Schedules
// opens or closes a window (zero when none will).
func NextChange(evs []Evaluation) time.Time {
	var next time.Time
	for _, ev := range evs {
		if ev.Err != nil {
			continue
		}
		if c := ev.Window.Change(); !c.IsZero() && (next.IsZero() || c.Before(next)) {
			next = c
		}
	}
	return next
}
