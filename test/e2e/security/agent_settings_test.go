package security_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/install"
	"github.com/gitfleet/fleet/test/framework"
)

// The agent runs with cluster-admin rights on its cluster, and a Cluster's
// agent settings choose its image, environment and placement: whoever sets
// them administers that cluster, whatever restriction confines the tenant's
// own deployments there. Writing Clusters does not let a tenant set them.
var _ = Describe("Agent settings", func() {
	It("14: a tenant who writes Clusters cannot set their agent's image, environment or placement", func() {
		ctx := env.Ctx
		const ns = "sec-agent-settings"
		tenant, err := framework.TenantClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), ns)
		Expect(err).NotTo(HaveOccurred())

		forbidden := func(err error) {
			GinkgoHelper()
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
			Expect(err.Error()).To(ContainSubstring(`needs verb "configure-agent" on clusters.fleet.cattle.io`))
		}
		// The admission policy may take a moment to be in force after the
		// install: the first refusal is waited for.
		Eventually(func(g Gomega) {
			err := tenant.Create(ctx, &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "born-with-settings"},
				Spec: fleet.ClusterSpec{PrivateRepoURL: "registry.attacker.example"}})
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed(), "a Cluster created with agent settings")

		cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tenant-cluster", Labels: map[string]string{"env": "dev"}}}
		Expect(tenant.Create(ctx, cluster)).To(Succeed(), "a Cluster without agent settings")
		attacks := map[string]func(*fleet.Cluster){
			"privateRepoURL": func(c *fleet.Cluster) { c.Spec.PrivateRepoURL = "registry.attacker.example" },
			"agentEnvVars": func(c *fleet.Cluster) {
				c.Spec.AgentEnvVars = []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy.attacker.example:3128"}}
			},
			"agentNamespace": func(c *fleet.Cluster) { c.Spec.AgentNamespace = "kube-system" },
			"hostNetwork":    func(c *fleet.Cluster) { c.Spec.HostNetwork = ptr.To(true) },
			"agentTolerations": func(c *fleet.Cluster) {
				c.Spec.AgentTolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
			},
			"agentAffinity":  func(c *fleet.Cluster) { c.Spec.AgentAffinity = &corev1.Affinity{} },
			"agentResources": func(c *fleet.Cluster) { c.Spec.AgentResources = &corev1.ResourceRequirements{} },
			// A PriorityClass ranks the agent over every pod of the cluster.
			"agentSchedulingCustomization": func(c *fleet.Cluster) {
				c.Spec.AgentSchedulingCustomization = &fleet.AgentSchedulingCustomization{
					PriorityClass: &fleet.PriorityClassSpec{Value: 1000000000}}
			},
			// Another registry's credential: the agent image from elsewhere.
			"agentPullSecrets": func(c *fleet.Cluster) {
				c.Spec.AgentPullSecrets = &[]corev1.LocalObjectReference{{Name: "attacker-registry"}}
			},
		}
		for field, attack := range attacks {
			By("patching spec." + field)
			c := &fleet.Cluster{}
			Expect(tenant.Get(ctx, client.ObjectKeyFromObject(cluster), c)).To(Succeed())
			base := c.DeepCopy()
			attack(c)
			forbidden(tenant.Patch(ctx, c, client.MergeFrom(base)))
		}
		after := &fleet.Cluster{}
		Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(cluster), after)).To(Succeed())
		Expect(after.Spec).To(Equal(fleet.ClusterSpec{}), "nothing of the agent's settings changed")

		By("the tenant still labels its Cluster")
		base := after.DeepCopy()
		after.Labels["env"] = "prod"
		Expect(tenant.Patch(ctx, after, client.MergeFrom(base))).To(Succeed())

		By("an admin sets them, and the tenant's later edits that leave them alone go through")
		base = after.DeepCopy()
		after.Spec.PrivateRepoURL = "registry.example.com"
		Expect(env.Admin.Patch(ctx, after, client.MergeFrom(base))).To(Succeed())
		// An update carries the whole spec, the admin's settings unchanged
		// (retried when the manager wrote the Cluster in between).
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := tenant.Get(ctx, client.ObjectKeyFromObject(cluster), after); err != nil {
				return err
			}
			after.Labels["team"] = "a"
			return tenant.Update(ctx, after)
		})).To(Succeed())
		Expect(tenant.Get(ctx, client.ObjectKeyFromObject(cluster), after)).To(Succeed())
		base = after.DeepCopy()
		after.Spec.PrivateRepoURL = ""
		forbidden(tenant.Patch(ctx, after, client.MergeFrom(base)))
		By("removing the whole spec removes the admin's settings: refused too")
		forbidden(tenant.Patch(ctx, after, client.RawPatch(types.MergePatchType, []byte(`{"spec":null}`))))
		forbidden(tenant.Patch(ctx, after, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec"}]`))))
		Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(cluster), after)).To(Succeed())
		Expect(after.Spec.PrivateRepoURL).To(Equal("registry.example.com"))

		By("an empty list stored by someone else is no setting: an update that drops it goes through")
		Expect(env.Admin.Patch(ctx, after, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"agentEnvVars":[]}}`)))).To(Succeed())
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := tenant.Get(ctx, client.ObjectKeyFromObject(cluster), after); err != nil {
				return err
			}
			after.Labels["team"] = "b"
			return tenant.Update(ctx, after) // omits the empty list
		})).To(Succeed())

		By("one granted the verb sets them")
		grantConfigureAgent(ns)
		Eventually(func() error {
			c := &fleet.Cluster{}
			if err := tenant.Get(ctx, client.ObjectKeyFromObject(cluster), c); err != nil {
				return err
			}
			base := c.DeepCopy()
			c.Spec.PrivateRepoURL = "registry.tenant.example"
			return tenant.Patch(ctx, c, client.MergeFrom(base))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	})
})

// grantConfigureAgent lets the tenant of ns (framework.TenantClient) set the
// agent settings of its namespace's Clusters, as an admin may choose to.
func grantConfigureAgent(ns string) {
	GinkgoHelper()
	ctx := env.Ctx
	Expect(env.Admin.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "configure-agent"},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{fleet.GroupVersion.Group}, Resources: []string{"clusters"},
			Verbs: []string{install.ConfigureAgentVerb}}}})).To(Succeed())
	Expect(env.Admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "configure-agent"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "configure-agent"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "tenant"}}})).To(Succeed())
	// RBAC is in force once the API server's authorizer has the binding.
	Eventually(func(g Gomega) {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: "system:serviceaccount:" + ns + ":tenant",
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Group: fleet.GroupVersion.Group,
				Resource: "clusters", Verb: install.ConfigureAgentVerb}}}
		g.Expect(env.Admin.Create(ctx, review)).To(Succeed())
		g.Expect(review.Status.Allowed).To(BeTrue())
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
}
