package bundle

import (
	"errors"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/internal/target"
)

// statusInput is what one reconcile saw that the bundle's status shows.
type statusInput struct {
	// counted tells whether the reconcile got as far as the deployments;
	// otherwise the counts of the last one stay.
	counted bool
	// summary counts the targeted clusters' deployments.
	summary fleet.BundleSummary
	// rollout is the rollout plan's status, when a plan was made.
	rollout *fleet.BundleStatus
	// errs are the clusters the bundle could not be worked out for.
	errs []error
	// contentName is the bundle's Content.
	contentName string
}

// statusView is what the status shows of a reconcile's scope.
func statusView(s *scope) statusInput {
	in := statusInput{errs: s.errs, contentName: s.contentName}
	if s.existing == nil {
		return in
	}
	in.counted, in.summary = true, summarize(s.targets, s.existing)
	if s.plan != nil {
		in.rollout = &s.plan.Status
	}
	return in
}

// setStatus sets the bundle's status from what a reconcile that ended with
// err saw. On success it sets Ready from the deployments' summary (False
// with ReasonError when some clusters could not be worked out) and the
// observed generation; on failure outcome sets Ready, and the counts are
// those of the deployments if they were looked at.
func setStatus(b *fleet.Bundle, in statusInput, err error) {
	st := &b.Status
	if !in.counted {
		if err != nil {
			st.Display.State = string(fleet.ErrApplied)
		}
		return
	}
	st.Summary = in.summary
	st.Display.ReadyClusters = fmt.Sprintf("%d/%d", st.Summary.Ready, st.Summary.DesiredReady)
	st.Display.State = string(summary.WorstState(st.Summary))
	st.Unavailable = st.Summary.DesiredReady - st.Summary.Ready - st.Summary.Pending
	if p := in.rollout; p != nil {
		st.MaxUnavailable, st.MaxUnavailablePartitions, st.UnavailablePartitions = p.MaxUnavailable, p.MaxUnavailablePartitions, p.UnavailablePartitions
		st.MaxNew, st.NewlyCreated, st.Partitions = p.MaxNew, p.NewlyCreated, p.Partitions
	}
	if in.contentName != "" {
		st.ResourcesSHA256Sum = strings.TrimPrefix(in.contentName, "s-")
	}
	if err != nil {
		return
	}
	conditions.Set(b, readyCondition(st.Summary, in.errs, b.Generation))
	st.ObservedGeneration = b.Generation
}

// targetingErrorPrefix starts the Ready message of a bundle some clusters'
// options could not be worked out for (a values template failing), as in
// Fleet, whose UI and users' alerts match on it.
const targetingErrorPrefix = "targeting error: "

// readyCondition is the Ready condition of a bundle whose reconcile
// succeeded: the summary's, unless some clusters could not be worked out.
func readyCondition(sum fleet.BundleSummary, errs []error, generation int64) metav1.Condition {
	if err := errors.Join(errs...); err != nil {
		return metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: fleet.ReasonError,
			Message: targetingErrorPrefix + err.Error(), ObservedGeneration: generation}
	}
	return summary.ReadyCondition(sum, generation)
}

// summarize counts the targeted clusters' deployments; a target without a
// BundleDeployment yet is Pending.
func summarize(targets []target.Deployment, existing map[string]*fleet.BundleDeployment) fleet.BundleSummary {
	bds := make([]*fleet.BundleDeployment, 0, len(targets))
	pending := 0
	for _, t := range targets {
		if bd := existing[t.Namespace]; bd != nil {
			bds = append(bds, bd)
		} else {
			pending++
		}
	}
	sum := summary.Of(bds, func(bd *fleet.BundleDeployment) string {
		return bd.Labels[fleet.ClusterNamespaceLabel] + "/" + bd.Labels[fleet.ClusterLabel]
	})
	for range pending {
		summary.Add(&sum, fleet.Pending)
	}
	return sum
}
