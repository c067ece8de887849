package sourcepoll

import (
	"fmt"
	"sort"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/summary"
)

// maxNonReadyResources bounds the non-ready resources a rollup lists.
const maxNonReadyResources = 10

// Rollup is what the status of a GitRepo or HelmOp shows of its Bundles.
type Rollup struct {
	// Bundles counts the Bundles rolled up.
	Bundles int
	// Summary sums the Bundles' summaries.
	Summary fleet.BundleSummary
	// DesiredReadyClusters is, as in Fleet, the most clusters any Bundle
	// targets, and ReadyClusters the fewest ready clusters of any of those
	// Bundles (a cluster is ready only when every Bundle is).
	ReadyClusters        int
	DesiredReadyClusters int
	// State is the worst state over the bundle deployments, "" with none.
	State fleet.BundleState
	// Message says what is not ready, "" when all is.
	Message string
	// ErrBundle is the first Bundle, by name, that is broken itself (see
	// BundleError), and ErrMessage what its Ready condition says.
	ErrBundle, ErrMessage string
}

// Ready says whether no Bundle is broken and every bundle deployment is
// ready.
func (r Rollup) Ready() bool {
	return r.ErrBundle == "" && summaryReady(r.Summary)
}

func summaryReady(s fleet.BundleSummary) bool {
	return s.Ready >= s.DesiredReady && s.NotReady+s.WaitApplied+s.ErrApplied+s.OutOfSync+s.Modified+s.Pending == 0
}

// BundleError returns the message of a Bundle's Ready condition when it is
// False although none of its deployments is behind: the Bundle itself is
// broken (invalid targets, Helm values that do not render for a cluster)
// and may target nothing at all, so its summary alone would look ready.
func BundleError(b *fleet.Bundle) (string, bool) {
	c := meta.FindStatusCondition(b.Status.Conditions, fleet.ConditionReady)
	if c == nil || c.Status != metav1.ConditionFalse || !summaryReady(b.Status.Summary) {
		return "", false
	}
	return c.Message, true
}

// RollupInputChanged says whether what RollupBundles reads of a Bundle's
// status (its summary, and its Ready condition's status and message)
// differs between o and n: when it does not, no rollup changes.
func RollupInputChanged(o, n *fleet.Bundle) bool {
	if !equality.Semantic.DeepEqual(o.Status.Summary, n.Status.Summary) {
		return true
	}
	oc, nc := meta.FindStatusCondition(o.Status.Conditions, fleet.ConditionReady), meta.FindStatusCondition(n.Status.Conditions, fleet.ConditionReady)
	if oc == nil || nc == nil {
		return oc != nc
	}
	return oc.Status != nc.Status || oc.Message != nc.Message
}

// RollupBundles sums the summaries of an object's Bundles; it sorts them
// by name. What it reads of their status is what RollupInputChanged
// compares: a change of one must go with the other.
func RollupBundles(bundles []fleet.Bundle) Rollup {
	r := Rollup{Bundles: len(bundles)}
	sort.Slice(bundles, func(i, j int) bool { return bundles[i].Name < bundles[j].Name })
	ready := -1
	worstBundle := ""
	for i := range bundles {
		b := &bundles[i]
		s := b.Status.Summary
		r.Summary.Ready += s.Ready
		r.Summary.NotReady += s.NotReady
		r.Summary.WaitApplied += s.WaitApplied
		r.Summary.ErrApplied += s.ErrApplied
		r.Summary.OutOfSync += s.OutOfSync
		r.Summary.Modified += s.Modified
		r.Summary.Pending += s.Pending
		r.Summary.DesiredReady += s.DesiredReady
		for _, nr := range s.NonReadyResources {
			if len(r.Summary.NonReadyResources) < maxNonReadyResources {
				r.Summary.NonReadyResources = append(r.Summary.NonReadyResources, nr)
			}
		}
		if s.DesiredReady > 0 {
			r.DesiredReadyClusters = max(r.DesiredReadyClusters, s.DesiredReady)
			if ready < 0 || s.Ready < ready {
				ready = s.Ready
			}
		}
		if st := worstState(s); st != "" && (r.State == "" || summary.Worse(st, r.State)) {
			r.State, worstBundle = st, b.Name
		}
		if msg, broken := BundleError(b); broken && r.ErrBundle == "" {
			r.ErrBundle, r.ErrMessage = b.Name, msg
		}
	}
	r.ReadyClusters = max(ready, 0)
	switch {
	case r.ErrBundle != "":
		r.Message = fmt.Sprintf("Bundle %s: %s", r.ErrBundle, r.ErrMessage)
	case r.State != "" && r.State != fleet.Ready:
		r.Message = fmt.Sprintf("%s(%d) [Bundle %s%s]", r.State, summary.Count(r.Summary, r.State), worstBundle, firstMessage(bundles, worstBundle, r.State))
	case !r.Ready():
		r.Message = fmt.Sprintf("%d/%d bundle deployments ready", r.Summary.Ready, r.Summary.DesiredReady)
	}
	return r
}

// worstState is the worst state counted in a summary, "" when it counts
// none.
func worstState(s fleet.BundleSummary) fleet.BundleState {
	worst := summary.WorstState(s)
	if worst == fleet.Ready && s.Ready == 0 {
		return ""
	}
	return worst
}

// firstMessage is the first message of a resource of Bundle name in state
// st, as ": resource: message", "" when there is none.
func firstMessage(bundles []fleet.Bundle, name string, st fleet.BundleState) string {
	for _, b := range bundles {
		if b.Name != name {
			continue
		}
		for _, nr := range b.Status.Summary.NonReadyResources {
			if nr.State == st && nr.Message != "" {
				return ": " + nr.Name + ": " + nr.Message
			}
		}
	}
	return ""
}

// ReadyCondition is False with the message of the first of the gates
// (condition types, e.g. Accepted and GitPolling) that is False, else
// False with the error of a broken Bundle, else False while some bundle
// deployment is not ready, else True. Its observedGeneration is left to
// the caller.
func (r Rollup) ReadyCondition(conds []metav1.Condition, gates ...string) metav1.Condition {
	for _, t := range gates {
		if c := meta.FindStatusCondition(conds, t); c != nil && c.Status == metav1.ConditionFalse {
			return metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: c.Reason, Message: c.Message}
		}
	}
	if r.ErrBundle != "" {
		return metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: fleet.ReasonBundleError, Message: r.Message}
	}
	if !r.Ready() {
		return metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: fleet.ReasonNotReady, Message: r.Message}
	}
	return metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionTrue, Reason: fleet.ReasonReady}
}

// Display is what kubectl shows: ready/desired bundle deployments, the
// worst state, and the first problem, that of the gates first.
func (r Rollup) Display(conds []metav1.Condition, gates ...string) fleet.GitRepoDisplay {
	return summary.Display(conds, summary.Rollup{Summary: r.Summary, State: r.State, Message: r.Message, BundleErr: r.ErrBundle != ""}, gates...)
}
