package badinput_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/summary"
)

// One ordered run: the healthy fleet is set up once (BeforeSuite), every
// surface feeds it its bad input, and the last spec checks that the manager
// still does its work. A failing entry does not stop the others.
var _ = Describe("Bad input", Ordered, ContinueOnFailure, func() {
	Context("git, fleet.yaml and bundle reading", gitSurface)
	Context("API validation of the custom resources", apiSurface)
	Context("registration and tokens", registrationSurface)
	Context("kubeconfig Secrets for Cluster import", kubeconfigSurface)
	Context("the git push webhook", webhookSurface)
	Context("the fleet CLI", cliSurface)

	It("leaves the healthy fleet as it was, and the manager still fans out a fresh bundle", func() {
		expectUndisturbed()
		Consistently(func(g Gomega) {
			g.Expect(takeSnapshot()).To(Equal(healthy))
		}, 2*pollingInterval, 200*time.Millisecond).Should(Succeed())

		files := map[string]string{
			"fresh/fleet.yaml": "defaultNamespace: fresh\n",
			"fresh/cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fresh}\ndata: {a: b}\n",
		}
		_, err := healthyGit.Commit("a fresh bundle", files)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			bds := deploymentsOf("healthy-fresh")
			g.Expect(keys(bds)).To(ConsistOf(append([]string{agentCluster.Name}, healthyClusters...)))
			bd := bds[agentCluster.Name]
			g.Expect(summary.State(bd)).To(Equal(fleet.Ready), "%s\nagent log:\n%s", summary.Message(bd), agent.Tail(4000))
		}, timeout, poll).Should(Succeed())
		Expect(local.Get(ctx, types.NamespacedName{Namespace: "fresh", Name: "fresh"}, &corev1.ConfigMap{})).To(Succeed())
		for _, b := range healthyBundles {
			Expect(deploymentsOf(b)).To(HaveLen(3), "bundle %s", b)
		}
	})
})
