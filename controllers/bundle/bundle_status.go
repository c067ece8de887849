package bundle

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/summary"
)

// computeStatus sets the bundle's status from what this reconcile saw.
func (r *Reconciler) computeStatus(s *scope, reconcileErr error) {
	b := s.bundle
	st := &b.Status
	if reconcileErr != nil && s.existing == nil {
		// Failed before looking at deployments: keep the counts, say why.
		meta.SetStatusCondition(&st.Conditions, ErrorCondition(reconcileErr, b.Generation))
		st.Display.State = string(fleet.ErrApplied)
		return
	}
	st.Summary = Summary(s)
	st.Display.ReadyClusters = fmt.Sprintf("%d/%d", st.Summary.Ready, st.Summary.DesiredReady)
	st.Display.State = string(summary.WorstState(st.Summary))
	st.Unavailable = st.Summary.DesiredReady - st.Summary.Ready - st.Summary.Pending
	if p := s.plan; p != nil {
		st.MaxUnavailable, st.MaxUnavailablePartitions, st.UnavailablePartitions = p.Status.MaxUnavailable, p.Status.MaxUnavailablePartitions, p.Status.UnavailablePartitions
		st.MaxNew, st.NewlyCreated, st.Partitions = p.Status.MaxNew, p.Status.NewlyCreated, p.Status.Partitions
	}
	cond := summary.ReadyCondition(st.Summary, b.Generation)
	if err := errors.Join(append(s.errs, reconcileErr)...); err != nil {
		cond = ErrorCondition(err, b.Generation)
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	if reconcileErr == nil {
		st.ObservedGeneration = b.Generation
	}
	if s.contentName != "" {
		st.ResourcesSHA256Sum = strings.TrimPrefix(s.contentName, "s-")
	}
}

// Summary counts the targeted clusters' deployments; a target without a
// BundleDeployment yet is Pending.
func Summary(s *scope) fleet.BundleSummary {
	bds := make([]*fleet.BundleDeployment, 0, len(s.targets))
	pending := 0
	for _, t := range s.targets {
		if bd := s.existing[t.namespace]; bd != nil {
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

// ErrorCondition is a False Ready condition carrying err.
func ErrorCondition(err error, generation int64) metav1.Condition {
	return metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: "Error",
		Message: err.Error(), ObservedGeneration: generation}
}
