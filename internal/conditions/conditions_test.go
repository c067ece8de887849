package conditions_test

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/conditions"
)

func TestMarkKeepsTransitionTimeUnlessStatusChanges(t *testing.T) {
	g := NewWithT(t)
	repo := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
	g.Expect(conditions.MarkFalse(repo, fleet.ConditionReady, fleet.ReasonNotReady, "waiting")).To(BeTrue())
	first := conditions.Get(repo, fleet.ConditionReady).LastTransitionTime
	g.Expect(first.IsZero()).To(BeFalse())
	g.Expect(conditions.Get(repo, fleet.ConditionReady).ObservedGeneration).To(Equal(int64(2)))

	// Same status, other message: updated in place, same transition time.
	g.Expect(conditions.MarkFalse(repo, fleet.ConditionReady, fleet.ReasonNotReady, "still waiting")).To(BeTrue())
	g.Expect(conditions.Get(repo, fleet.ConditionReady).LastTransitionTime).To(Equal(first))
	g.Expect(conditions.MarkFalse(repo, fleet.ConditionReady, fleet.ReasonNotReady, "still waiting")).To(BeFalse(), "nothing changed")

	g.Expect(conditions.MarkTrue(repo, fleet.ConditionReady, fleet.ReasonReady, "")).To(BeTrue())
	g.Expect(conditions.IsTrue(repo, fleet.ConditionReady)).To(BeTrue())
	g.Expect(repo.Status.Conditions).To(HaveLen(1))
	g.Expect(conditions.Get(repo, fleet.ConditionAccepted)).To(BeNil())
}

func TestSame(t *testing.T) {
	g := NewWithT(t)
	a := &metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", ObservedGeneration: 1}
	b := &metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready", ObservedGeneration: 2}
	g.Expect(conditions.Same(a, b)).To(BeTrue())
	g.Expect(conditions.Same(a, nil)).To(BeFalse())
	g.Expect(conditions.Same(nil, nil)).To(BeTrue())
	b.Message = "other"
	g.Expect(conditions.Same(a, b)).To(BeFalse())
}
