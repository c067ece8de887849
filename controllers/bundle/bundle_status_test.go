package bundle

import (
	"errors"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/target"
)

func TestSetStatus(t *testing.T) {
	ready := func(ns string) *fleet.BundleDeployment {
		return &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns},
			Spec:   fleet.BundleDeploymentSpec{DeploymentID: "s-abc:1", StagedDeploymentID: "s-abc:1"},
			Status: fleet.BundleDeploymentStatus{AppliedDeploymentID: "s-abc:1", Ready: true, NonModified: true}}
	}
	targets := []target.Deployment{{Namespace: "c1"}, {Namespace: "c2"}}
	both := map[string]*fleet.BundleDeployment{"c1": ready("c1"), "c2": ready("c2")}
	earlier := fleet.BundleStatus{
		ObservedGeneration: 1,
		Summary:            fleet.BundleSummary{DesiredReady: 5, Ready: 5},
		Display:            fleet.BundleDisplay{ReadyClusters: "5/5", State: string(fleet.Ready)},
		Conditions:         []metav1.Condition{{Type: fleet.ConditionReady, Status: metav1.ConditionTrue, Reason: fleet.ReasonReady}},
	}
	failed := errors.New("creating BundleDeployment: connection refused")
	cases := []struct {
		name        string
		scope       scope
		err         error
		wantSummary fleet.BundleSummary
		wantDisplay fleet.BundleDisplay
		// wantReady is the Ready condition's status and reason; "" means
		// setStatus leaves it as it was (outcome sets it on failure).
		wantReady    metav1.ConditionStatus
		wantReason   string
		wantObserved int64
		wantSum      string
		wantMaxNew   int
	}{
		{
			name:         "every target ready",
			scope:        scope{targets: targets, existing: both, contentName: "s-abc"},
			wantSummary:  fleet.BundleSummary{DesiredReady: 2, Ready: 2},
			wantDisplay:  fleet.BundleDisplay{ReadyClusters: "2/2", State: string(fleet.Ready)},
			wantReady:    metav1.ConditionTrue,
			wantReason:   fleet.ReasonReady,
			wantObserved: 2,
			wantSum:      "abc",
		},
		{
			name:         "a target without a deployment yet is pending",
			scope:        scope{targets: targets, existing: map[string]*fleet.BundleDeployment{"c1": ready("c1")}, plan: &Plan{Status: fleet.BundleStatus{MaxNew: 50}}},
			wantSummary:  fleet.BundleSummary{DesiredReady: 2, Ready: 1, Pending: 1},
			wantDisplay:  fleet.BundleDisplay{ReadyClusters: "1/2", State: string(fleet.Pending)},
			wantReady:    metav1.ConditionFalse,
			wantReason:   string(fleet.Pending),
			wantObserved: 2,
			wantMaxNew:   50,
		},
		{
			name:         "a cluster whose values do not render",
			scope:        scope{targets: targets, existing: both, errs: []error{errors.New("cluster fleet-default/c3: template: bad")}},
			wantSummary:  fleet.BundleSummary{DesiredReady: 2, Ready: 2},
			wantDisplay:  fleet.BundleDisplay{ReadyClusters: "2/2", State: string(fleet.Ready)},
			wantReady:    metav1.ConditionFalse,
			wantReason:   fleet.ReasonError,
			wantObserved: 2,
		},
		{
			name:         "failed before the deployments were looked at: the counts stay",
			scope:        scope{},
			err:          failed,
			wantSummary:  earlier.Summary,
			wantDisplay:  fleet.BundleDisplay{ReadyClusters: "5/5", State: string(fleet.ErrApplied)},
			wantObserved: 1,
		},
		{
			name:         "failed while writing: the counts are new, the generation is not observed",
			scope:        scope{targets: targets, existing: both},
			err:          failed,
			wantSummary:  fleet.BundleSummary{DesiredReady: 2, Ready: 2},
			wantDisplay:  fleet.BundleDisplay{ReadyClusters: "2/2", State: string(fleet.Ready)},
			wantObserved: 1,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app", Generation: 2}, Status: *earlier.DeepCopy()}
			s := tc.scope
			s.bundle = b
			setStatus(b, statusView(&s), tc.err)
			g.Expect(b.Status.Summary).To(Equal(tc.wantSummary))
			g.Expect(b.Status.Display).To(Equal(tc.wantDisplay))
			g.Expect(b.Status.ObservedGeneration).To(Equal(tc.wantObserved))
			g.Expect(b.Status.ResourcesSHA256Sum).To(Equal(tc.wantSum))
			g.Expect(b.Status.MaxNew).To(Equal(tc.wantMaxNew))
			c := conditions.Get(b, fleet.ConditionReady)
			if tc.wantReady == "" {
				g.Expect(c).To(Equal(&earlier.Conditions[0]), "Ready is outcome's to set")
				return
			}
			g.Expect(c.Status).To(Equal(tc.wantReady))
			g.Expect(c.Reason).To(Equal(tc.wantReason))
			g.Expect(c.ObservedGeneration).To(Equal(int64(2)))
		})
	}
}
