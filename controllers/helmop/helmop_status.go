package helmop

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/sourcepoll"
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

// gates are the conditions whose failure the Ready condition and the
// display show first.
var gates = []string{fleet.ConditionAccepted, fleet.ConditionPolled}

// readyCondition is False with the message of Accepted or Polled when one
// is False, else False while there is no Bundle yet, else as the Bundle's
// rollup says (see sourcepoll.Rollup.ReadyCondition).
func readyCondition(conds []metav1.Condition, r sourcepoll.Rollup) metav1.Condition {
	c := r.ReadyCondition(conds, gates...)
	if c.Status == metav1.ConditionTrue && r.Bundles == 0 {
		return metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: fleet.ReasonNotReady, Message: "no bundle yet"}
	}
	return c
}

// rollupBundle is the rollup of the HelmOp's Bundle, nil when there is none.
func rollupBundle(b *fleet.Bundle) sourcepoll.Rollup {
	if b == nil {
		return sourcepoll.RollupBundles(nil)
	}
	return sourcepoll.RollupBundles([]fleet.Bundle{*b})
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
	s.Summary = r.Summary
	s.ReadyClusters = r.ReadyClusters
	s.DesiredReadyClusters = r.DesiredReadyClusters
	s.Display = r.Display(s.Conditions, gates...)
}
