package sourcepoll

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func bundle(name string, s fleet.BundleSummary) fleet.Bundle {
	return fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: fleet.BundleStatus{Summary: s}}
}

func TestRollupBundles(t *testing.T) {
	g := NewWithT(t)
	r := RollupBundles(nil)
	g.Expect(r.Ready()).To(BeTrue(), "no bundles, nothing to wait for")
	g.Expect(r.State).To(BeEmpty())

	r = RollupBundles([]fleet.Bundle{
		bundle("b", fleet.BundleSummary{Ready: 3, DesiredReady: 3}),
		bundle("a", fleet.BundleSummary{Ready: 1, NotReady: 1, ErrApplied: 1, DesiredReady: 3, NonReadyResources: []fleet.NonReadyResource{
			{Name: "c1", State: fleet.NotReady, Message: "deployment not ready"},
			{Name: "c2", State: fleet.ErrApplied, Message: "chart not found"},
		}}),
		bundle("c", fleet.BundleSummary{}),
	})
	g.Expect(r.Summary.Ready).To(Equal(4))
	g.Expect(r.Summary.DesiredReady).To(Equal(6))
	g.Expect(r.Summary.NotReady).To(Equal(1))
	g.Expect(r.Summary.ErrApplied).To(Equal(1))
	g.Expect(r.Summary.NonReadyResources).To(HaveLen(2))
	g.Expect(r.DesiredReadyClusters).To(Equal(3))
	g.Expect(r.ReadyClusters).To(Equal(1))
	g.Expect(r.State).To(Equal(fleet.ErrApplied))
	g.Expect(r.Message).To(Equal("ErrApplied(1) [Bundle a: c2: chart not found]"))
	g.Expect(r.Ready()).To(BeFalse())

	r = RollupBundles([]fleet.Bundle{bundle("a", fleet.BundleSummary{Ready: 2, DesiredReady: 2})})
	g.Expect(r.Ready()).To(BeTrue())
	g.Expect(r.State).To(Equal(fleet.Ready))
	g.Expect(r.Message).To(BeEmpty())

	// A Bundle broken itself targets nothing, or fewer clusters than it
	// should: its summary looks ready, its Ready condition does not.
	notReady := bundle("n", fleet.BundleSummary{NotReady: 1, DesiredReady: 1})
	notReady.Status.Conditions = []metav1.Condition{{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Message: "NotReady(1)"}}
	r = RollupBundles([]fleet.Bundle{brokenBundle("z", "other"), bundle("a", fleet.BundleSummary{Ready: 2, DesiredReady: 2}),
		brokenBundle("b", `invalid targets: target "x": clusterSelector: "Near" is not a valid label selector operator`), notReady})
	g.Expect(r.Ready()).To(BeFalse())
	g.Expect(r.ErrBundle).To(Equal("b"), "the first broken bundle by name; a not-ready one is no broken one")
	g.Expect(r.Message).To(Equal(`Bundle b: invalid targets: target "x": clusterSelector: "Near" is not a valid label selector operator`))
	g.Expect(r.State).To(Equal(fleet.NotReady))
}

func brokenBundle(name, msg string) fleet.Bundle {
	b := bundle(name, fleet.BundleSummary{})
	b.Status.Conditions = []metav1.Condition{{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: "Error", Message: msg}}
	return b
}

func TestReadyConditionAndDisplay(t *testing.T) {
	allReady := RollupBundles([]fleet.Bundle{bundle("a", fleet.BundleSummary{Ready: 2, DesiredReady: 2})})
	notReady := RollupBundles([]fleet.Bundle{bundle("a", fleet.BundleSummary{Ready: 1, NotReady: 1, DesiredReady: 2})})
	brokenRollup := RollupBundles([]fleet.Bundle{bundle("a", fleet.BundleSummary{Ready: 2, DesiredReady: 2}), brokenBundle("b", "invalid targets")})
	ok := []metav1.Condition{
		{Type: fleet.ConditionAccepted, Status: metav1.ConditionTrue},
		{Type: fleet.ConditionGitPolling, Status: metav1.ConditionTrue},
	}
	broken := []metav1.Condition{
		{Type: fleet.ConditionAccepted, Status: metav1.ConditionFalse, Reason: fleet.ReasonBranchNotFound, Message: "branch dev not found in R"},
		{Type: fleet.ConditionGitPolling, Status: metav1.ConditionFalse, Reason: fleet.ReasonBranchNotFound, Message: "other"},
	}
	for name, tc := range map[string]struct {
		conds   []metav1.Condition
		r       Rollup
		status  metav1.ConditionStatus
		message string
		display fleet.GitRepoDisplay
	}{
		"ready": {ok, allReady, metav1.ConditionTrue, "", fleet.GitRepoDisplay{ReadyBundleDeployments: "2/2", State: "Ready"}},
		"bundles not ready": {ok, notReady, metav1.ConditionFalse, "NotReady(1) [Bundle a]",
			fleet.GitRepoDisplay{ReadyBundleDeployments: "1/2", State: "NotReady", Message: "NotReady(1) [Bundle a]"}},
		"git error wins": {broken, allReady, metav1.ConditionFalse, "branch dev not found in R",
			fleet.GitRepoDisplay{ReadyBundleDeployments: "2/2", State: "Ready", Message: "branch dev not found in R", Error: true}},
		"broken bundle": {ok, brokenRollup, metav1.ConditionFalse, "Bundle b: invalid targets",
			fleet.GitRepoDisplay{ReadyBundleDeployments: "2/2", State: "Ready", Message: "Bundle b: invalid targets", Error: true}},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			c := tc.r.ReadyCondition(tc.conds, fleet.ConditionAccepted, fleet.ConditionGitPolling)
			g.Expect(c.Status).To(Equal(tc.status))
			g.Expect(c.Message).To(Equal(tc.message))
			g.Expect(tc.r.Display(tc.conds, fleet.ConditionAccepted, fleet.ConditionGitPolling)).To(Equal(tc.display))
		})
	}
}
