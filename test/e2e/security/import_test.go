package security_test

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"

	"github.com/gitfleet/fleet/agent/join"
	"github.com/gitfleet/fleet/agent/upstream"
	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/kubeconfig"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/secretmeta"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework"
)

// Attacks through the import of clusters by kubeconfig: a tenant (foothold
// e) names what is not its own, and the manager, which reads and installs
// with its own rights, must refuse.
var _ = Describe("Import", func() {
	importSpecs()
	secretCacheSpecs()
})

// importSpecs: holes 1 and 6, a tenant's Cluster naming another namespace's
// kubeconfig Secret or another cluster's clientID.
func importSpecs() {
	It("1: a tenant's Cluster cannot name another namespace's kubeconfig Secret", func() {
		ctx := env.Ctx
		tenantA, err := framework.TenantClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), "tenant-a")
		Expect(err).NotTo(HaveOccurred())
		// The strongest tenant: one an admin let set its agents' settings
		// (spec 14), here the agent namespace of the import.
		grantConfigureAgent("tenant-a")
		tenantB, err := framework.TenantClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), "tenant-b")
		Expect(err).NotTo(HaveOccurred())
		victim := env.Downstreams[1]

		By("tenant B keeps a kubeconfig of its cluster, and a Cluster, in its own namespace")
		kc, err := kubeconfig.FromREST(victim.Config, "victim")
		Expect(err).NotTo(HaveOccurred())
		bSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-b", Name: "import1-b-kubeconfig"},
			Data: map[string][]byte{fleet.KubeConfigSecretValueKey: kc}}
		Expect(tenantB.Create(ctx, bSecret)).To(Succeed())
		bCluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-b", Name: "import1-b", Labels: map[string]string{"owner": "b"}}}
		Expect(tenantB.Create(ctx, bCluster)).To(Succeed())

		By("tenant A creates a Cluster naming B's Secret")
		const stolenNS = "sec-import1-stolen"
		attack := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "import1-steal"},
			Spec: fleet.ClusterSpec{KubeConfigSecret: bSecret.Name, KubeConfigSecretNamespace: "tenant-b", AgentNamespace: stolenNS}}
		Expect(tenantA.Create(ctx, attack)).To(Succeed())

		Eventually(func(g Gomega) {
			got := &fleet.Cluster{}
			g.Expect(tenantA.Get(ctx, client.ObjectKeyFromObject(attack), got)).To(Succeed())
			c := conditions.Get(got, fleet.ConditionImported)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(fleet.ReasonSecretNamespaceNotAllowed))
			g.Expect(c.Message).To(ContainSubstring("--kubeconfig-secret-namespaces"))
		}, 20*time.Second, 100*time.Millisecond).Should(Succeed(), "tenant A sees why its Cluster is refused")

		By("nothing reaches B's cluster, and B's objects are as they were")
		victimAdmin, err := victim.Client(nil)
		Expect(err).NotTo(HaveOccurred())
		Consistently(func(g Gomega) {
			g.Expect(apierrors.IsNotFound(victimAdmin.Get(ctx, types.NamespacedName{Name: stolenNS}, &corev1.Namespace{}))).
				To(BeTrue(), "no agent namespace in the victim's cluster")
			deps := &appsv1.DeploymentList{}
			g.Expect(victimAdmin.List(ctx, deps, client.InNamespace(stolenNS))).To(Succeed())
			g.Expect(deps.Items).To(BeEmpty())
			g.Expect(apierrors.IsNotFound(env.Admin.Get(ctx, types.NamespacedName{Namespace: "tenant-a", Name: names.ImportToken(attack.Name)},
				&fleet.ClusterRegistrationToken{}))).To(BeTrue(), "no import token minted for the attack")
		}, 5*time.Second, 250*time.Millisecond).Should(Succeed())

		got := &corev1.Secret{}
		Expect(tenantB.Get(ctx, client.ObjectKeyFromObject(bSecret), got)).To(Succeed())
		Expect(got.ResourceVersion).To(Equal(bSecret.ResourceVersion))
		Expect(got.Data).To(Equal(bSecret.Data))
		gotCluster := &fleet.Cluster{}
		Expect(tenantB.Get(ctx, client.ObjectKeyFromObject(bCluster), gotCluster)).To(Succeed())
		Expect(gotCluster.UID).To(Equal(bCluster.UID))
		Expect(gotCluster.Generation).To(Equal(bCluster.Generation))
		Expect(gotCluster.Labels).To(Equal(bCluster.Labels))
		Expect(gotCluster.Spec).To(Equal(bCluster.Spec))
	})

	It("6: an import naming a token-registered cluster's clientID from another namespace adopts nothing", func() {
		ctx := env.Ctx
		v := registerByToken(ctx, env.Downstreams[1], "sec-import6-victims", "sec-import6-victim-agent", map[string]string{"env": "victim"})
		tenant, err := framework.TenantClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), "sec-import6-tenant")
		Expect(err).NotTo(HaveOccurred())
		grantConfigureAgent("sec-import6-tenant")

		By("the tenant imports its own cluster under the victim's clientID")
		attack := spoofedImport(ctx, tenant, "sec-import6-tenant", "import6-spoof", v.cred.ClientID, "sec-import6-agent")
		// Nothing of its namespace has that identity: the import goes on,
		// into the tenant's own cluster, and nothing else is touched.
		Eventually(func(g Gomega) string {
			got := &fleet.Cluster{}
			g.Expect(tenant.Get(ctx, client.ObjectKeyFromObject(attack), got)).To(Succeed())
			return importedReason(got)
		}, 30*time.Second, 100*time.Millisecond).Should(Equal(fleet.ReasonApplied))
		Consistently(func(g Gomega) { v.expectUnchanged(g) }, 3*time.Second, 250*time.Millisecond).Should(Succeed())
		got := &fleet.Cluster{}
		Expect(tenant.Get(ctx, client.ObjectKeyFromObject(attack), got)).To(Succeed())
		Expect(got.Labels).NotTo(HaveKey("env"), "no labels copied from the victim")
	})

	It("6: an import naming a token-registered cluster's clientID in its own namespace, with a kubeconfig of another cluster, adopts nothing", func() {
		ctx := env.Ctx
		const ns = "sec-import6s-tenant"
		tenant, err := framework.TenantClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), ns)
		Expect(err).NotTo(HaveOccurred())
		grantConfigureAgent(ns)
		v := registerByToken(ctx, env.Downstreams[1], ns, "sec-import6s-victim-agent", map[string]string{"env": "victim"})

		By("the tenant imports another cluster under the victim's clientID")
		const agentNS = "sec-import6s-agent"
		attack := spoofedImport(ctx, tenant, ns, "import6s-spoof", v.cred.ClientID, agentNS)
		Eventually(func(g Gomega) {
			got := &fleet.Cluster{}
			g.Expect(tenant.Get(ctx, client.ObjectKeyFromObject(attack), got)).To(Succeed())
			c := conditions.Get(got, fleet.ConditionImported)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(fleet.ReasonIdentityConflict))
			g.Expect(c.Message).To(ContainSubstring("it is a different cluster, so nothing is taken over"))
		}, 20*time.Second, 100*time.Millisecond).Should(Succeed())

		Consistently(func(g Gomega) { v.expectUnchanged(g) }, 3*time.Second, 250*time.Millisecond).Should(Succeed())
		got := &fleet.Cluster{}
		Expect(tenant.Get(ctx, client.ObjectKeyFromObject(attack), got)).To(Succeed())
		Expect(got.Labels).NotTo(HaveKey("env"), "no labels copied from the victim")
		attackerAdmin, err := env.Downstreams[0].Client(nil)
		Expect(err).NotTo(HaveOccurred())
		Expect(apierrors.IsNotFound(attackerAdmin.Get(ctx, types.NamespacedName{Name: agentNS}, &corev1.Namespace{}))).
			To(BeTrue(), "nothing installed while the identity is in conflict")
	})
}

// secretCacheSpecs: hole 12, what the manager's cache holds of Secrets.
func secretCacheSpecs() {
	It("12: the manager's cache holds no Secret it does not manage, and watches the others without their content", func() {
		ctx := env.Ctx
		// What Kubernetes RBAC cannot limit: the manager reads kubeconfig and
		// git credential Secrets of any namespace a Cluster or GitRepo lives
		// in, and mints ServiceAccount tokens in the cluster namespaces it
		// makes, so its ClusterRole keeps get/list/watch on Secrets and
		// create on serviceaccounts/token everywhere. What holds is that no
		// Secret it does not manage stays in its memory.
		managerCfg, err := framework.ManagerConfig(ctx, env.Upstream.Config)
		Expect(err).NotTo(HaveOccurred())

		By("an unrelated Secret in kube-system, annotated with a copy of its data")
		unrelated := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "kube-system", Name: "sec-import12-unrelated",
			Annotations: map[string]string{"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"password":"aHVudGVyMg=="}}`}},
			Data: map[string][]byte{"password": []byte("hunter2")}}
		Expect(env.Admin.Create(ctx, unrelated)).To(Succeed())
		DeferCleanup(func() { _ = env.Admin.Delete(context.Background(), unrelated) })
		// A Secret the manager does manage: a registration token's values.
		if err := env.Admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "sec-import12"}}); !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		token, _, err := agentinstall.CreateToken(ctx, env.Admin, agentinstall.TokenOptions{Namespace: "sec-import12"})
		Expect(err).NotTo(HaveOccurred())

		By("the manager's cache, with the manager's options and credential")
		httpClient, err := rest.HTTPClientFor(managerCfg)
		Expect(err).NotTo(HaveOccurred())
		mapper, err := apiutil.NewDynamicRESTMapper(managerCfg, httpClient)
		Expect(err).NotTo(HaveOccurred())
		opts := controllers.CacheOptions(env.Options)
		opts.Scheme, opts.Mapper, opts.HTTPClient = controllers.Scheme(), mapper, httpClient
		c, err := cache.New(managerCfg, opts)
		Expect(err).NotTo(HaveOccurred())
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		go func() { _ = c.Start(cctx) }()
		Expect(c.WaitForCacheSync(cctx)).To(BeTrue())
		Eventually(func() error {
			return c.Get(ctx, types.NamespacedName{Namespace: fleet.LocalWorkspace, Name: fleet.LocalClusterSecretName}, &corev1.Secret{})
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed(), "the cache holds the Secrets the manager writes in its own namespaces")
		err = c.Get(ctx, client.ObjectKeyFromObject(unrelated), &corev1.Secret{})
		Expect(err).To(HaveOccurred(), "an unrelated Secret is not in the cache")
		// Hole 32.3: a token's values, in the token's namespace, are read
		// uncached; whoever writes Secrets there may label theirs alike.
		err = c.Get(ctx, types.NamespacedName{Namespace: token.Namespace, Name: token.Status.SecretName}, &corev1.Secret{})
		Expect(err).To(HaveOccurred(), "a Secret of a tenant's namespace is not in the cache")
		list := &corev1.SecretList{}
		Expect(c.List(ctx, list)).To(Succeed())
		Expect(list.Items).NotTo(BeEmpty())
		for _, s := range list.Items {
			Expect(s.Labels).To(HaveKeyWithValue(fleet.ManagedLabel, "true"), "Secret %s/%s in the manager's cache", s.Namespace, s.Name)
			Expect([]string{fleet.DefaultSystemNamespace, fleet.DefaultSystemRegistrationNamespace, fleet.LocalWorkspace}).To(ContainElement(s.Namespace))
		}

		By("the metadata watch of the import and Cluster API controllers")
		w, err := secretmeta.New(managerCfg, controllers.Scheme(), mapper, httpClient)
		Expect(err).NotTo(HaveOccurred())
		go func() { _ = w.Start(cctx) }()
		var meta *metav1.PartialObjectMetadata
		Eventually(func() (err error) {
			meta, err = w.Get(ctx, client.ObjectKeyFromObject(unrelated))
			return err
		}, 10*time.Second, 100*time.Millisecond).Should(Succeed())
		Expect(meta.Annotations).To(BeEmpty(), "annotations, which may copy the data, are not kept")
		Expect(meta.UID).To(Equal(unrelated.UID))
	})
}

// victimRegistration is a cluster registered by token, as a person would,
// and what must stay as it is.
type victimRegistration struct {
	cred    *upstream.Credential
	cluster *fleet.Cluster
	regs    []fleet.ClusterRegistration
}

// registerByToken registers cp into namespace ns with a registration token,
// the way the agent does (without running it), and returns the credential
// and the Cluster it made.
func registerByToken(ctx context.Context, cp *controlplane.ControlPlane, ns, agentNS string, labels map[string]string) *victimRegistration {
	GinkgoHelper()
	if err := env.Admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	_, boot, err := agentinstall.CreateToken(ctx, env.Admin, agentinstall.TokenOptions{Namespace: ns, TTL: time.Hour})
	Expect(err).NotTo(HaveOccurred())
	objs, err := agentinstall.Objects(agentinstall.Options{Namespace: agentNS, Bootstrap: boot,
		Config: &agentinstall.AgentConfig{Labels: labels}, NoDeployment: true})
	Expect(err).NotTo(HaveOccurred())
	local, err := cp.Client(nil)
	Expect(err).NotTo(HaveOccurred())
	Expect(agentinstall.Apply(ctx, local, objs)).To(Succeed())
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cred, err := join.Ensure(rctx, join.Options{Namespace: agentNS, Local: local,
		MinBackoff: 100 * time.Millisecond, MaxBackoff: 2 * time.Second})
	Expect(err).NotTo(HaveOccurred())
	v := &victimRegistration{cred: cred, cluster: &fleet.Cluster{}}
	Expect(env.Admin.Get(ctx, types.NamespacedName{Namespace: cred.Namespace, Name: cred.ClusterName}, v.cluster)).To(Succeed())
	Expect(v.cluster.Labels).To(HaveKeyWithValue("env", labels["env"]))
	list := &fleet.ClusterRegistrationList{}
	Expect(env.Admin.List(ctx, list, client.InNamespace(ns))).To(Succeed())
	for _, r := range list.Items {
		if r.Spec.ClientID == cred.ClientID {
			v.regs = append(v.regs, r)
		}
	}
	Expect(v.regs).NotTo(BeEmpty())
	return v
}

// expectUnchanged checks that the victim's Cluster, registrations and
// credential are as they were.
func (v *victimRegistration) expectUnchanged(g Gomega) {
	ctx := env.Ctx
	got := &fleet.Cluster{}
	g.Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(v.cluster), got)).To(Succeed(), "the victim's Cluster is not deleted")
	g.Expect(got.UID).To(Equal(v.cluster.UID))
	g.Expect(got.DeletionTimestamp).To(BeNil())
	g.Expect(got.Labels).To(Equal(v.cluster.Labels))
	g.Expect(got.Spec).To(Equal(v.cluster.Spec))
	for _, r := range v.regs {
		reg := &fleet.ClusterRegistration{}
		g.Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(&r), reg)).To(Succeed(), "the victim's registration is not revoked")
		g.Expect(reg.UID).To(Equal(r.UID))
		g.Expect(reg.DeletionTimestamp).To(BeNil())
	}
	g.Expect(upstream.Check(ctx, v.cred)).To(Succeed(), "the victim's credential still works")
}

// spoofedImport creates, as the tenant, a kubeconfig Secret of the
// attacker's own cluster and a Cluster importing it under clientID.
func spoofedImport(ctx context.Context, tenant client.Client, ns, name, clientID, agentNS string) *fleet.Cluster {
	GinkgoHelper()
	kc, err := kubeconfig.FromREST(env.Downstreams[0].Config, "attacker")
	Expect(err).NotTo(HaveOccurred())
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-kubeconfig"},
		Data: map[string][]byte{fleet.KubeConfigSecretValueKey: kc}}
	Expect(tenant.Create(ctx, secret)).To(Succeed())
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: fleet.ClusterSpec{KubeConfigSecret: secret.Name, ClientID: clientID, AgentNamespace: agentNS}}
	Expect(tenant.Create(ctx, c)).To(Succeed())
	return c
}

func importedReason(c *fleet.Cluster) string {
	if cond := conditions.Get(c, fleet.ConditionImported); cond != nil {
		return cond.Reason
	}
	return ""
}
