package helmop_test

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/test/chartrepo"
)

// The HelmOp enforcement point of a Policy: a chart no
// helmOp.allowedChartPatterns allows is refused (PolicyRefused, naming the
// Policy) before any repository is asked; allowed, the HelmOp deploys with
// the Policy's default service account.
func TestHelmOpPolicy(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	repo := newRepo(t, chartrepo.Options{}, "1.0.0")
	policy := &fleet.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "charts"}, RequireServiceAccount: true,
		HelmOp: &fleet.HelmOpPolicySpec{DefaultServiceAccount: "deployer", AllowedChartPatterns: []string{"web"}}}
	g.Expect(env.Create(ctx, policy)).To(Succeed())

	op := newHelmOp(ns, "app", fleet.HelmOptions{Repo: repo.URL, Chart: "app"})
	g.Expect(env.Create(ctx, op)).To(Succeed())
	g.Eventually(getHelmOp(g, ns, "app")).WithTimeout(eventually).WithPolling(poll).Should(
		condition(fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonPolicyRefused,
			"disallowed helm.chart app: it must match one of the patterns web of Policy charts as a whole"))
	n, _ := repo.Requests()
	g.Expect(n).To(BeZero(), "a refused HelmOp reaches no repository")

	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(policy), policy)).To(Succeed())
	policy.HelmOp.AllowedChartPatterns = append(policy.HelmOp.AllowedChartPatterns, "app")
	g.Expect(env.Update(ctx, policy)).To(Succeed())
	g.Eventually(bundleChartVersion(g, ns, "app", "app")).WithTimeout(eventually).WithPolling(poll).Should(Equal("1.0.0"), "deployed once allowed")
	b := &fleet.Bundle{}
	g.Expect(env.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app"}, b)).To(Succeed())
	g.Expect(b.Spec.ServiceAccount).To(Equal("deployer"), "the Policy's default")

	// A changed default reaches the Bundle at once, without a change of
	// the HelmOp nor a poll.
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(policy), policy)).To(Succeed())
	policy.HelmOp.DefaultServiceAccount = "deployer-2"
	g.Expect(env.Update(ctx, policy)).To(Succeed())
	g.Eventually(func() string {
		b := &fleet.Bundle{}
		g.Expect(env.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app"}, b)).To(Succeed())
		return b.Spec.ServiceAccount
	}).WithTimeout(eventually).WithPolling(poll).Should(Equal("deployer-2"), "the new default, written at once")
}
