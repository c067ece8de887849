package summary

import (
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func bd(name string, mutate func(*fleet.BundleDeployment)) *fleet.BundleDeployment {
	b := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: name}}
	b.Spec.DeploymentID, b.Spec.StagedDeploymentID = "c:1", "c:1"
	b.Status.AppliedDeploymentID, b.Status.Ready, b.Status.NonModified = "c:1", true, true
	mutate(b)
	return b
}

func TestState(t *testing.T) {
	cases := map[fleet.BundleState]func(*fleet.BundleDeployment){
		fleet.Ready:       func(*fleet.BundleDeployment) {},
		fleet.WaitApplied: func(b *fleet.BundleDeployment) { b.Status.AppliedDeploymentID = "" },
		fleet.ErrApplied: func(b *fleet.BundleDeployment) {
			b.Status.AppliedDeploymentID = "c:0"
			b.Status.Conditions = []metav1.Condition{{Type: fleet.ConditionDeployed, Status: metav1.ConditionFalse, Message: "boom"}}
		},
		fleet.NotReady:  func(b *fleet.BundleDeployment) { b.Status.Ready = false },
		fleet.OutOfSync: func(b *fleet.BundleDeployment) { b.Spec.StagedDeploymentID = "c:2" },
		fleet.Modified:  func(b *fleet.BundleDeployment) { b.Status.NonModified = false },
	}
	for want, mutate := range cases {
		NewWithT(t).Expect(State(bd("x", mutate))).To(Equal(want))
	}
}

func TestOfAndCondition(t *testing.T) {
	g := NewWithT(t)
	bds := []*fleet.BundleDeployment{
		bd("a", func(*fleet.BundleDeployment) {}),
		bd("b", func(b *fleet.BundleDeployment) { b.Status.Ready = false }),
		bd("c", func(b *fleet.BundleDeployment) {
			b.Status.AppliedDeploymentID = ""
			b.Status.Conditions = []metav1.Condition{{Type: fleet.ConditionDeployed, Status: metav1.ConditionFalse, Message: "chart failed"}}
		}),
	}
	s := Of(bds, func(b *fleet.BundleDeployment) string { return b.Name })
	g.Expect(s.DesiredReady).To(Equal(3))
	g.Expect(s.Ready).To(Equal(1))
	g.Expect(s.NonReadyResources[0].Name).To(Equal("c"), "worst first")
	g.Expect(WorstState(s)).To(Equal(fleet.ErrApplied))
	c := ReadyCondition(s, 4)
	g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(c.Reason).To(Equal("ErrApplied"))
	g.Expect(c.Message).To(ContainSubstring("c ErrApplied: chart failed"))
	g.Expect(ReadyCondition(fleet.BundleSummary{}, 1).Status).To(Equal(metav1.ConditionTrue))
}

// TestOfCarriesResources: a non-ready entry carries the deployment's
// modifiedStatus and nonReadyStatus, at most MaxNonReady of each, without
// patches too long to copy everywhere, and shares no memory with the
// deployment.
func TestOfCarriesResources(t *testing.T) {
	g := NewWithT(t)
	b := bd("x", func(b *fleet.BundleDeployment) {
		b.Status.Ready, b.Status.NonModified = false, false
		for i := range MaxNonReady + 3 {
			b.Status.NonReadyStatus = append(b.Status.NonReadyStatus, fleet.NonReadyStatus{Kind: "Deployment", Name: fmt.Sprint("d", i),
				Summary: fleet.Summary{State: "updating", Transitioning: true, Message: []string{"0/1 available"}}})
			b.Status.ModifiedStatus = append(b.Status.ModifiedStatus, fleet.ModifiedStatus{Kind: "ConfigMap", Name: fmt.Sprint("c", i), Patch: `{"data":{"a":"b"}}`})
		}
		b.Status.ModifiedStatus[1].Patch = strings.Repeat("x", MaxPatchLen+1)
	})
	s := Of([]*fleet.BundleDeployment{b}, func(b *fleet.BundleDeployment) string { return b.Name })
	g.Expect(s.NonReadyResources).To(HaveLen(1))
	nr := s.NonReadyResources[0]
	g.Expect(nr.State).To(Equal(fleet.NotReady))
	g.Expect(nr.NonReadyStatus).To(HaveLen(MaxNonReady))
	g.Expect(nr.ModifiedStatus).To(HaveLen(MaxNonReady))
	g.Expect(nr.NonReadyStatus[0].Summary.Message).To(Equal([]string{"0/1 available"}))
	g.Expect(nr.ModifiedStatus[0].Patch).To(Equal(`{"data":{"a":"b"}}`))
	g.Expect(nr.ModifiedStatus[1].Patch).To(BeEmpty(), "a patch too long is left out")
	nr.NonReadyStatus[0].Summary.Message[0] = "changed"
	g.Expect(b.Status.NonReadyStatus[0].Summary.Message[0]).To(Equal("0/1 available"), "no memory shared with the deployment")
}

// Without a condition message, a deployment's message is its first
// non-ready or modified resource in Fleet's words ("job.batch default/x
// missing"), which Fleet's UI and its users' alerts match on.
func TestMessageInFleetsWords(t *testing.T) {
	g := NewWithT(t)
	missing := bd("m", func(b *fleet.BundleDeployment) {
		b.Status.NonModified = false
		b.Status.ModifiedStatus = []fleet.ModifiedStatus{{APIVersion: "batch/v1", Kind: "Job", Namespace: "default", Name: "x", Create: true}}
	})
	g.Expect(Message(missing)).To(Equal("job.batch default/x missing"))
	notReady := bd("n", func(b *fleet.BundleDeployment) {
		b.Status.Ready = false
		b.Status.NonReadyStatus = []fleet.NonReadyStatus{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "default", Name: "web",
			Summary: fleet.Summary{State: "updating", Message: []string{"0/1 available"}}}}
	})
	g.Expect(Message(notReady)).To(Equal("deployment.apps default/web 0/1 available"))
}
