package security_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/controllers/agentbundle"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/test/chartrepo"
	"github.com/gitfleet/fleet/test/framework"
)

// A cluster's agent Bundle is fleet-agent-<cluster> in the Cluster's
// namespace, and fleet's labels (fleet.cattle.io/...) are its own word:
// BundleNamespaceMappings and the agent Bundles are told by them. A tenant
// (foothold e), or whoever controls its repository (f), must claim
// neither: a Bundle holding the agent Bundle's name before the manager
// writes it freezes that cluster's agent settings and upgrades, and a
// label of fleet's opts the tenant's Bundles into a mapping meant for
// others.
var _ = Describe("Reserved bundle names and labels", func() {
	It("a tenant's GitRepo or HelmOp cannot take an agent Bundle's name or set fleet's labels", func() {
		ctx, ns := env.Ctx, "sec-reserved"
		tenant, err := framework.TenantClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), ns)
		Expect(err).NotTo(HaveOccurred())
		// The victim is a cluster of the namespace about to register: its
		// Cluster's name, and so its agent Bundle's, follows from its
		// identity, which the tenant may know beforehand.
		const victimID = "sec-reserved-victim"
		victim := names.ClusterForClientID(victimID)
		agentBundle := names.AgentBundle(victim)

		// The admin's mapping lets the Bundles of this namespace labelled
		// as trusted target the manager's own cluster.
		mapping := &fleet.BundleNamespaceMapping{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "trusted-to-local"},
			BundleSelector:    &metav1.LabelSelector{MatchLabels: map[string]string{"fleet.cattle.io/trusted": "true"}},
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": fleet.LocalWorkspace}}}
		Expect(env.Admin.Create(ctx, mapping)).To(Succeed())

		newRepo := func(name, fleetYAML string) {
			GinkgoHelper()
			files := map[string]string{"cm.yaml": fmt.Sprintf(configMap, name)}
			if fleetYAML != "" {
				files["fleet.yaml"] = fleetYAML
			}
			_, url := gitRepoAt("reserved-"+name, files)
			Expect(tenant.Create(ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: fleet.GitRepoSpec{Repo: url, Branch: "main", PollingInterval: pollEvery(time.Second)}})).To(Succeed())
		}
		refused := func(name string, want ...string) {
			GinkgoHelper()
			c := gitRepoCondition(tenant, ns, name, fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonInvalidBundle, time.Minute)
			for _, w := range want {
				Expect(c.Message).To(ContainSubstring(w))
			}
			Expect(bundlesOf(ns, name)).To(BeEmpty(), "no Bundle for GitRepo %s", name)
		}

		By("fleet.yaml names the victim's agent Bundle")
		newRepo("squat", "name: "+agentBundle+"\n")
		refused("squat", "fleet.yaml: line 1: name:", fmt.Sprintf("%q", agentBundle), `begins with "fleet-agent-", which is reserved`)

		By("the GitRepo's own name makes the agent Bundle's name")
		newRepo(agentBundle, "")
		refused(agentBundle, fmt.Sprintf("bundle name %q, made from the name", agentBundle), "set another name: in fleet.yaml")

		By("fleet.yaml sets the label the admin's mapping selects")
		newRepo("trusted", "labels:\n  team: a\n  fleet.cattle.io/trusted: \"true\"\n")
		refused("trusted", "fleet.yaml: line 3: labels:", `label key "fleet.cattle.io/trusted" is reserved`)

		By("a HelmOp named after the agent Bundle, or labelled with fleet's labels")
		chart, err := chartrepo.New([]chartrepo.Chart{{Name: "app", Version: "1.0.0",
			Templates: map[string]string{"cm.yaml": fmt.Sprintf(configMap, "reserved-helmop")}}}, chartrepo.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(chart.Close)
		for name, labels := range map[string]map[string]string{
			agentBundle:       nil,
			"reserved-labels": {"fleet.cattle.io/trusted": "true"},
		} {
			op := &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			op.Spec.Helm = &fleet.HelmOptions{Repo: chart.URL, Chart: "app", Version: "1.0.0"}
			op.Spec.Labels = labels
			Expect(tenant.Create(ctx, op)).To(Succeed())
		}
		c := helmOpCondition(tenant, ns, agentBundle, fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonInvalidOptions, time.Minute)
		Expect(c.Message).To(ContainSubstring(fmt.Sprintf(`the name %q begins with "fleet-agent-"`, agentBundle)))
		c = helmOpCondition(tenant, ns, "reserved-labels", fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonInvalidOptions, time.Minute)
		Expect(c.Message).To(ContainSubstring(`spec.labels: label key "fleet.cattle.io/trusted" is reserved`))
		for _, name := range []string{agentBundle, "reserved-labels"} {
			err := env.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &fleet.Bundle{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "no Bundle for HelmOp %s: %v", name, err)
		}

		By("the victim registers: the name of its agent Bundle is free for the manager")
		_, _, cluster := checkedInVictim(ctx, ns, victimID)
		Expect(cluster.Name).To(Equal(victim))
		// This suite runs the manager without agent Bundles: the Bundle is
		// written here as the manager renders and writes it.
		want, err := agentbundle.Desired(cluster, "registry.example.com/fleet-agent:v1", corev1.PullIfNotPresent, nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(env.Admin.Create(ctx, want)).To(Succeed(), "nothing holds the agent Bundle's name")
		Consistently(func(g Gomega) {
			b := &fleet.Bundle{}
			g.Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(want), b)).To(Succeed())
			g.Expect(b.UID).To(Equal(want.UID))
			g.Expect(b.Generation).To(Equal(want.Generation), "the tenant's GitRepos and HelmOps, polling every second, leave it alone")
			g.Expect(b.Labels).To(Equal(want.Labels))
		}, 3*time.Second, 250*time.Millisecond).Should(Succeed())

		By("the admin's mapping selects none of the tenant's Bundles")
		list := &fleet.BundleList{}
		Expect(env.Admin.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"fleet.cattle.io/trusted": "true"})).To(Succeed())
		Expect(list.Items).To(BeEmpty())
		after := &fleet.BundleNamespaceMapping{}
		Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(mapping), after)).To(Succeed())
		Expect(after.Generation).To(Equal(mapping.Generation))
	})
})
