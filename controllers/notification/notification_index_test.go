package notification

import (
	"slices"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/event"

	notification "github.com/gitfleet/fleet/api/notification/v1alpha1"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func names(reqs []ctrl.Request) []string {
	out := make([]string, 0, len(reqs))
	for _, r := range reqs {
		out = append(out, r.Namespace+"/"+r.Name)
	}
	slices.Sort(out)
	return out
}

func TestIndexMapsSourcesAndSecrets(t *testing.T) {
	g := NewWithT(t)
	x := newIndex()
	x.set(&notification.Notification{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "all", Generation: 1}})
	x.set(&notification.Notification{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "team", Generation: 1},
		Spec: notification.NotificationSpec{
			Sources: notification.Sources{Kinds: []notification.SourceKind{notification.KindGitRepo},
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "x"}}},
			Destination: notification.Destination{SecretRef: &notification.LocalObjectReference{Name: "hook"}}}})
	x.set(&notification.Notification{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "broken", Generation: 1},
		Spec: notification.NotificationSpec{Sources: notification.Sources{Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "team", Operator: "Bogus"}}}},
			Destination: notification.Destination{SecretRef: &notification.LocalObjectReference{Name: "hook"}}}})
	x.set(&notification.Notification{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "helm", Generation: 1},
		Spec: notification.NotificationSpec{Sources: notification.Sources{Kinds: []notification.SourceKind{notification.KindHelmOp}}}})

	g.Expect(names(x.selecting(notification.KindGitRepo, "a", labels.Set{"team": "x"}))).To(Equal([]string{"a/all", "a/team"}))
	g.Expect(names(x.selecting(notification.KindGitRepo, "a", labels.Set{"team": "y"}))).To(Equal([]string{"a/all"}))
	g.Expect(names(x.selecting(notification.KindHelmOp, "a", nil))).To(Equal([]string{"a/all"}))
	g.Expect(x.selecting(notification.KindGitRepo, "b", nil)).To(BeEmpty())
	g.Expect(names(x.selecting(notification.KindHelmOp, "b", nil))).To(Equal([]string{"b/helm"}))
	g.Expect(x.selecting(notification.KindGitRepo, "c", nil)).To(BeEmpty())

	some, needLabels := x.follows(notification.KindGitRepo, "a")
	g.Expect([]bool{some, needLabels}).To(Equal([]bool{true, true}))
	some, needLabels = x.follows(notification.KindHelmOp, "b")
	g.Expect([]bool{some, needLabels}).To(Equal([]bool{true, false}), "selects every HelmOp: no need to read one")
	some, _ = x.follows(notification.KindGitRepo, "b")
	g.Expect(some).To(BeFalse(), "no Notification of b follows GitRepos: a Bundle of b reads nothing")

	g.Expect(names(x.usingSecret("a", "hook"))).To(Equal([]string{"a/broken", "a/team"}))
	g.Expect(x.usingSecret("b", "hook")).To(BeEmpty(), "a Secret of another namespace wakes nothing")

	// A new generation replaces the entry; a status update (same
	// generation) keeps it; a removal drops it.
	x.set(&notification.Notification{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "team", Generation: 2},
		Spec: notification.NotificationSpec{Destination: notification.Destination{SecretRef: &notification.LocalObjectReference{Name: "other"}}}})
	g.Expect(names(x.usingSecret("a", "other"))).To(Equal([]string{"a/team"}))
	g.Expect(names(x.selecting(notification.KindGitRepo, "a", labels.Set{"team": "y"}))).To(Equal([]string{"a/all", "a/team"}))
	x.set(&notification.Notification{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "team", Generation: 2}})
	g.Expect(names(x.usingSecret("a", "other"))).To(Equal([]string{"a/team"}))
	x.remove("a", "team")
	x.remove("b", "helm")
	g.Expect(x.usingSecret("a", "other")).To(BeEmpty())
	g.Expect(x.byNS).NotTo(HaveKey("b"))
}

// Only a change that can change what is due about a rollout passes: the
// counts of a rollout in progress, and the messages of its clusters, do
// not.
func TestBundleChanged(t *testing.T) {
	base := func() *fleet.Bundle {
		return &fleet.Bundle{
			ObjectMeta: metav1.ObjectMeta{Name: "app-web", Namespace: "ns", Generation: 3,
				Labels: map[string]string{fleet.RepoLabel: "app", fleet.CommitLabel: "c1"}},
			Status: fleet.BundleStatus{ObservedGeneration: 3, Summary: fleet.BundleSummary{DesiredReady: 10, Ready: 4, WaitApplied: 6,
				NonReadyResources: []fleet.NonReadyResource{{Name: "ns/edge-1", State: fleet.WaitApplied, Message: "waiting"}}},
				Partitions: []fleet.PartitionStatus{{Name: "canary", Count: 2, Summary: fleet.BundleSummary{Ready: 1}}, {Name: "rest", Count: 8}},
				Conditions: []metav1.Condition{{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: "NotReady", Message: "4/10"}}},
		}
	}
	tests := []struct {
		name   string
		change func(b *fleet.Bundle)
		passes bool
	}{
		{"one more cluster ready", func(b *fleet.Bundle) { b.Status.Summary.Ready, b.Status.Summary.WaitApplied = 5, 5 }, false},
		{"a cluster's message", func(b *fleet.Bundle) { b.Status.Summary.NonReadyResources[0].Message = "still waiting" }, false},
		{"the Ready condition's message", func(b *fleet.Bundle) { b.Status.Conditions[0].Message = "5/10" }, false},
		{"the display", func(b *fleet.Bundle) { b.Status.Display.State = "WaitApplied" }, false},
		{"a new commit", func(b *fleet.Bundle) { b.Labels[fleet.CommitLabel] = "c2" }, true},
		{"a new spec not yet seen", func(b *fleet.Bundle) { b.Generation = 4 }, true},
		{"a cluster failed", func(b *fleet.Bundle) { b.Status.Summary.ErrApplied, b.Status.Summary.WaitApplied = 1, 5 }, true},
		{"every cluster ready", func(b *fleet.Bundle) {
			b.Status.Summary = fleet.BundleSummary{DesiredReady: 10, Ready: 10}
		}, true},
		{"a partition reached", func(b *fleet.Bundle) { b.Status.Partitions[0].Summary.Ready = 2 }, true},
		{"broken", func(b *fleet.Bundle) {
			b.Status.Summary = fleet.BundleSummary{}
			b.Status.Conditions[0].Message = "invalid targets"
		}, true},
		{"another GitRepo's", func(b *fleet.Bundle) { b.Labels[fleet.RepoLabel] = "other" }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			old, updated := base(), base()
			tt.change(updated)
			g.Expect(BundleChanged.Update(event.UpdateEvent{ObjectOld: old, ObjectNew: updated})).To(Equal(tt.passes))
		})
	}
	g := NewWithT(t)
	g.Expect(BundleChanged.Create(event.CreateEvent{Object: base()})).To(BeTrue())
	g.Expect(BundleChanged.Delete(event.DeleteEvent{Object: base()})).To(BeTrue())
}
