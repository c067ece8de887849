package sourcepoll

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// A Bundle update reaches the object its label names when it may change
// that object's rollup: the status the rollup reads (summary, Ready), the
// label or its deletion; a spec written by the object's own sync, and the
// status the bundle controller writes for it alone, do not.
func TestRollupChanged(t *testing.T) {
	old := &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "b", Labels: map[string]string{fleet.RepoLabel: "repo"}, Generation: 1},
		Spec:       fleet.BundleSpec{ContentsID: "s-1"},
		Status: fleet.BundleStatus{ObservedGeneration: 1, Summary: fleet.BundleSummary{Ready: 1, DesiredReady: 1},
			Conditions: []metav1.Condition{{Type: fleet.ConditionReady, Status: metav1.ConditionTrue, Reason: fleet.ReasonReady}}},
	}
	now := metav1.Now()
	for _, tc := range []struct {
		name   string
		change func(b *fleet.Bundle)
		want   bool
	}{
		{name: "spec only", change: func(b *fleet.Bundle) { b.Spec.ContentsID = "s-2"; b.Generation = 2 }, want: false},
		{name: "another label", change: func(b *fleet.Bundle) { b.Labels["other"] = "x" }, want: false},
		{name: "status the rollup does not read", change: func(b *fleet.Bundle) {
			b.Status.ObservedGeneration = 2
			b.Status.ResourcesSHA256Sum = "new"
			b.Status.Conditions[0].LastTransitionTime = now
			b.Status.Conditions[0].ObservedGeneration = 2
		}, want: false},
		{name: "summary", change: func(b *fleet.Bundle) { b.Status.Summary.Ready = 0 }, want: true},
		{name: "non-ready resources", change: func(b *fleet.Bundle) {
			b.Status.Summary.NonReadyResources = []fleet.NonReadyResource{{Name: "x"}}
		}, want: true},
		{name: "Ready status", change: func(b *fleet.Bundle) { b.Status.Conditions[0].Status = metav1.ConditionFalse }, want: true},
		{name: "Ready message", change: func(b *fleet.Bundle) { b.Status.Conditions[0].Message = "broken" }, want: true},
		{name: "Ready gone", change: func(b *fleet.Bundle) { b.Status.Conditions = nil }, want: true},
		{name: "the label", change: func(b *fleet.Bundle) { b.Labels[fleet.RepoLabel] = "other" }, want: true},
		{name: "deleted", change: func(b *fleet.Bundle) { b.DeletionTimestamp = &now }, want: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := old.DeepCopy()
			tc.change(n)
			got := rollupChanged(fleet.RepoLabel).Update(event.UpdateEvent{ObjectOld: old, ObjectNew: n})
			NewWithT(t).Expect(got).To(Equal(tc.want))
		})
	}
	g := NewWithT(t)
	g.Expect(rollupChanged(fleet.RepoLabel).Create(event.CreateEvent{Object: old})).To(BeTrue())
	g.Expect(rollupChanged(fleet.RepoLabel).Delete(event.DeleteEvent{Object: old})).To(BeTrue())
}
