package helmop

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/summary"
)

// acceptedCondition says whether the current spec is applied: the chart
// resolved and its Bundle written. A transient failure is reported too
// (reason FetchFailed), while it is retried.
func acceptedCondition(err error, version string) metav1.Condition {
	return outcome.Condition(fleet.ConditionAccepted, err, fleet.ReasonChartApplied, "chart version "+displayVersion(version)+" is in the bundle", fleet.ReasonFetchFailed)
}

// polledCondition reports the last check of a polling HelmOp's repository.
func polledCondition(err error, latest string) metav1.Condition {
	return outcome.Condition(fleet.ConditionPolled, err, fleet.ReasonPolled, "latest matching version "+displayVersion(latest), fleet.ReasonFetchFailed)
}

// readyCondition is False with the message of Accepted or Polled when one
// is False, else False with the error of a broken Bundle, else False while
// some bundle deployment is not ready (or there is no Bundle yet), else
// True.
func readyCondition(conds []metav1.Condition, r rollup) metav1.Condition {
	for _, t := range []string{fleet.ConditionAccepted, fleet.ConditionPolled} {
		if c := meta.FindStatusCondition(conds, t); c != nil && c.Status == metav1.ConditionFalse {
			return metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: c.Reason, Message: c.Message}
		}
	}
	switch {
	case !r.haveBundle:
		return metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: fleet.ReasonNotReady, Message: "no bundle yet"}
	case r.bundleErr != "":
		return metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: fleet.ReasonBundleError, Message: r.message}
	case !r.ready():
		return metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: fleet.ReasonNotReady, Message: r.message}
	}
	return metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionTrue, Reason: fleet.ReasonReady}
}

// rollup is what a HelmOp's status shows of its Bundle.
type rollup struct {
	haveBundle bool
	summary    fleet.BundleSummary
	// state is the worst state over the bundle deployments, "" with none.
	state fleet.BundleState
	// bundleErr is the message of the Bundle's Ready condition when the
	// Bundle itself is broken (e.g. invalid targets).
	bundleErr string
	message   string
}

func (r rollup) ready() bool {
	s := r.summary
	return r.bundleErr == "" && s.Ready >= s.DesiredReady && s.NotReady+s.WaitApplied+s.ErrApplied+s.OutOfSync+s.Modified+s.Pending == 0
}

// rollupBundle is the rollup of the HelmOp's Bundle, nil when there is none.
func rollupBundle(b *fleet.Bundle) rollup {
	if b == nil {
		return rollup{}
	}
	r := rollup{haveBundle: true, summary: b.Status.Summary}
	if st := summary.WorstState(r.summary); st != fleet.Ready || r.summary.Ready > 0 {
		r.state = st
	}
	if c := meta.FindStatusCondition(b.Status.Conditions, fleet.ConditionReady); c != nil && c.Status == metav1.ConditionFalse {
		if (rollup{summary: r.summary}).ready() {
			r.bundleErr = c.Message
		}
	}
	switch {
	case r.bundleErr != "":
		r.message = fmt.Sprintf("Bundle %s: %s", b.Name, r.bundleErr)
	case r.state != "" && r.state != fleet.Ready:
		r.message = fmt.Sprintf("%s(%d) [Bundle %s%s]", r.state, summary.Count(r.summary, r.state), b.Name, firstMessage(r.summary, r.state))
	case !r.ready():
		r.message = fmt.Sprintf("%d/%d bundle deployments ready", r.summary.Ready, r.summary.DesiredReady)
	}
	return r
}

func firstMessage(s fleet.BundleSummary, st fleet.BundleState) string {
	for _, nr := range s.NonReadyResources {
		if nr.State == st && nr.Message != "" {
			return ": " + nr.Name + ": " + nr.Message
		}
	}
	return ""
}

// display is what kubectl shows: ready/desired bundle deployments, the worst
// state, and the first problem.
func display(conds []metav1.Condition, r rollup) fleet.GitRepoDisplay {
	return summary.Display(conds, summary.Rollup{Summary: r.summary, State: r.state, Message: r.message, BundleErr: r.bundleErr != ""},
		fleet.ConditionAccepted, fleet.ConditionPolled)
}

// setStatus computes the whole status (but version, observedGeneration and
// lastPollingTriggered, which the phases set) from what the controller
// remembers of the last check and resolution and from the HelmOp's Bundle
// (nil when there is none).
func setStatus(op *fleet.HelmOp, st *opState, b *fleet.Bundle) {
	s := &op.Status
	if st.checked {
		applied := s.Version
		if st.applied != "" {
			applied = st.applied
		}
		c := acceptedCondition(st.acceptErr, applied)
		c.ObservedGeneration = op.Generation
		meta.SetStatusCondition(&s.Conditions, c)
	}
	if st.polled && polls(op) {
		c := polledCondition(st.pollErr, st.latest)
		c.ObservedGeneration = op.Generation
		meta.SetStatusCondition(&s.Conditions, c)
	} else if !polls(op) {
		meta.RemoveStatusCondition(&s.Conditions, fleet.ConditionPolled)
	}
	r := rollupBundle(b)
	ready := readyCondition(s.Conditions, r)
	ready.ObservedGeneration = op.Generation
	meta.SetStatusCondition(&s.Conditions, ready)
	s.Summary = r.summary
	s.ReadyClusters = r.summary.Ready
	s.DesiredReadyClusters = r.summary.DesiredReady
	s.Display = display(s.Conditions, r)
}

// conditionEvent is an event to record about a HelmOp.
type conditionEvent struct {
	warning              bool
	reason, action, note string
}

// conditionEvents are the events that the change of the Accepted and
// Polled conditions from before to after deserves: a Warning when one turns
// False or keeps False with a new reason, a Normal event when one recovers.
// A new message alone is no news, so a stalled HelmOp polled every minute
// records one Warning, not one per poll.
func conditionEvents(before, after []metav1.Condition) []conditionEvent {
	var out []conditionEvent
	for _, t := range []struct{ cond, action string }{{fleet.ConditionPolled, "Poll"}, {fleet.ConditionAccepted, "Sync"}} {
		was, now := meta.FindStatusCondition(before, t.cond), meta.FindStatusCondition(after, t.cond)
		switch {
		case now == nil:
		case now.Status == metav1.ConditionFalse && (was == nil || was.Status != metav1.ConditionFalse || was.Reason != now.Reason):
			out = append(out, conditionEvent{warning: true, reason: now.Reason, action: t.action, note: now.Message})
		case now.Status == metav1.ConditionTrue && was != nil && was.Status == metav1.ConditionFalse:
			out = append(out, conditionEvent{reason: now.Reason, action: t.action, note: now.Message})
		}
	}
	return out
}
