package bundle_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/conditions"
)

// TestPolicyChecksBundles: the Bundle enforcement point of a Policy, the
// way around the GitRepo and HelmOp checks (a Bundle written directly).
// A Bundle without a serviceAccount, or whose target sets one no Policy
// allows, gets no BundleDeployment (Ready=False, PolicyRefused, naming the
// Policy); once it complies it is deployed, with createNamespace: false
// stamped on the deployment since the Policy requires a service account.
func TestPolicyChecksBundles(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "policy")
	g.Expect(err).NotTo(HaveOccurred())
	clusterNS := newCluster(ctx, g, ns.Name, "one")
	g.Expect(env.CreateAndWait(ctx, &fleet.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "tenants"},
		RequireServiceAccount: true, AllowedServiceAccounts: []string{"deployer"}})).To(Succeed())

	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "test"}}
	b := &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "direct", Namespace: ns.Name},
		Spec: fleet.BundleSpec{
			Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n"}},
			Targets:   []fleet.BundleTarget{{Name: "test", ClusterSelector: selector}},
		},
	}
	g.Expect(env.Create(ctx, b)).To(Succeed())
	t.Cleanup(func() { _ = client.IgnoreNotFound(env.Delete(context.Background(), b)) })
	key := client.ObjectKey{Namespace: clusterNS, Name: b.Name}
	refused := func(message string) {
		g.Eventually(func(g Gomega) {
			got := &fleet.Bundle{}
			g.Expect(env.Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed())
			c := conditions.Get(got, fleet.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(fleet.ReasonPolicyRefused))
			g.Expect(c.Message).To(ContainSubstring(message))
		}).WithTimeout(timeout).Should(Succeed(), "Ready=False PolicyRefused: %s", message)
		g.Consistently(func() bool {
			return apierrors.IsNotFound(env.Get(ctx, key, &fleet.BundleDeployment{}))
		}).WithTimeout(2*time.Second).Should(BeTrue(), "no BundleDeployment")
	}
	refused("serviceAccount is required by Policy but is not set: requireServiceAccount of Policy tenants")

	update := func(mutate func(*fleet.BundleSpec)) {
		g.Eventually(func() error {
			got := &fleet.Bundle{}
			if err := env.Get(ctx, client.ObjectKeyFromObject(b), got); err != nil {
				return err
			}
			mutate(&got.Spec)
			return env.Update(ctx, got)
		}).WithTimeout(timeout).Should(Succeed())
	}
	update(func(s *fleet.BundleSpec) {
		s.ServiceAccount = "deployer"
		s.Targets[0].ServiceAccount = "cluster-admin"
	})
	refused("disallowed serviceAccount (target test) cluster-admin: Policy tenants allows deployer only")

	yes := true
	update(func(s *fleet.BundleSpec) {
		s.Targets[0].ServiceAccount = ""
		s.CreateNamespace = &yes
	})
	g.Eventually(func(g Gomega) {
		bd := &fleet.BundleDeployment{}
		g.Expect(env.Get(ctx, key, bd)).To(Succeed())
		g.Expect(bd.Spec.Options.ServiceAccount).To(Equal("deployer"))
		g.Expect(bd.Spec.Options.CreateNamespace).To(Equal(new(bool)), "requireServiceAccount without allowNamespaceCreation: createNamespace false, whatever the bundle says")
	}).WithTimeout(timeout).Should(Succeed(), "deployed once it complies")

	p := &fleet.Policy{}
	g.Expect(env.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "tenants"}, p)).To(Succeed())
	p.AllowNamespaceCreation = true
	g.Expect(env.Update(ctx, p)).To(Succeed())
	g.Eventually(func(g Gomega) {
		bd := &fleet.BundleDeployment{}
		g.Expect(env.Get(ctx, key, bd)).To(Succeed())
		g.Expect(bd.Spec.Options.CreateNamespace).To(Equal(&yes), "allowNamespaceCreation: the bundle's own say")
	}).WithTimeout(timeout).Should(Succeed(), "a changed Policy retargets the bundle")
}
