package security_test

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/controllers/capi"
	"github.com/gitfleet/fleet/internal/install"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework"
)

// The manager copies a Cluster API Cluster's agent annotations (and the
// ClusterClass variables that say the same) into the agent settings of the
// fleet Cluster it enrolls, and it holds the verb configure-agent to do so.
// Whoever may write Cluster API Clusters must not get around that verb
// through it: the agent runs as cluster-admin downstream, and these choose
// where and how. Cluster API is installed after the manager here, as it may
// be anywhere.
var _ = Describe("Cluster API agent annotations", func() {
	It("a user who writes Cluster API Clusters cannot set their agent settings without configure-agent", func() {
		ctx, ns := env.Ctx, "sec-capi-agent"
		installCAPI()
		Expect(env.Admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())

		By("the admin's Cluster API Cluster, enrolled by the manager")
		victim := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "victim", Labels: map[string]string{"env": "dev"}},
			Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 6443}}}
		Expect(env.Admin.Create(ctx, victim)).To(Succeed())
		Expect(env.Admin.Status().Patch(ctx, victim, client.RawPatch(types.MergePatchType,
			[]byte(`{"status":{"initialization":{"controlPlaneInitialized":true}}}`)))).To(Succeed())
		Expect(env.Admin.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: capi.KubeconfigSecretName(victim.Name), Labels: map[string]string{clusterv1.ClusterNameLabel: victim.Name}},
			Type:       clusterv1.ClusterSecretType,
			Data:       map[string][]byte{fleet.KubeConfigSecretValueKey: []byte("not a kubeconfig")},
		})).To(Succeed())
		enrolled := &fleet.Cluster{}
		Eventually(func() error {
			return env.Admin.Get(ctx, client.ObjectKeyFromObject(victim), enrolled)
		}, 2*time.Minute, 200*time.Millisecond).Should(Succeed(), "the manager enrolls the Cluster API Cluster once Cluster API is installed")
		Expect(enrolled.Spec.HostNetwork).To(BeNil())

		By("a user who may write Cluster API Clusters in the namespace, nothing else")
		writer := capiWriter(ns)
		forbidden := func(err error) {
			GinkgoHelper()
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
			Expect(err.Error()).To(ContainSubstring(`setting them needs verb "configure-agent" on clusters.fleet.cattle.io`))
		}
		// The policy may take a moment to see the new resource: the first
		// refusal is waited for, and whatever got through is removed.
		Eventually(func(g Gomega) {
			born := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "born-with-settings",
				Annotations: map[string]string{capi.HostNetworkAnnotation: "true"}}, Spec: *victim.Spec.DeepCopy()}
			err := writer.Create(ctx, born)
			if err == nil {
				_ = env.Admin.Delete(ctx, born)
			}
			g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed(), "a Cluster API Cluster created with an agent annotation")

		By("a Cluster API Cluster created with the ClusterClass variable")
		forbidden(writer.Create(ctx, &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "born-with-variable"},
			Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: victim.Spec.ControlPlaneEndpoint, Topology: clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: "any"}, Version: "v1.31.0",
				Variables: []clusterv1.ClusterVariable{{Name: capi.HostNetworkVariable, Value: apiextensionsv1.JSON{Raw: []byte("true")}}}}}}))

		for annotation, value := range map[string]string{
			capi.HostNetworkAnnotation:      "true",
			capi.AgentTolerationsAnnotation: capi.BootstrapTolerationsValue,
			capi.AgentNamespaceAnnotation:   "kube-system",
		} {
			By("annotating the enrolled Cluster API Cluster with " + annotation)
			c := &clusterv1.Cluster{}
			Expect(writer.Get(ctx, client.ObjectKeyFromObject(victim), c)).To(Succeed())
			base := c.DeepCopy()
			metav1.SetMetaDataAnnotation(&c.ObjectMeta, annotation, value)
			forbidden(writer.Patch(ctx, c, client.MergeFrom(base)))
		}

		By("the writer's other edits go through, and the manager keeps the fleet Cluster in line")
		c := &clusterv1.Cluster{}
		Expect(writer.Get(ctx, client.ObjectKeyFromObject(victim), c)).To(Succeed())
		base := c.DeepCopy()
		c.Labels["env"] = "prod"
		Expect(writer.Patch(ctx, c, client.MergeFrom(base))).To(Succeed())
		Eventually(func(g Gomega) {
			got := &fleet.Cluster{}
			g.Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(victim), got)).To(Succeed())
			g.Expect(got.Labels).To(HaveKeyWithValue("env", "prod"))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())

		By("nothing of the fleet Cluster's agent settings changed")
		after := &fleet.Cluster{}
		Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(victim), after)).To(Succeed())
		Expect(after.UID).To(Equal(enrolled.UID))
		Expect(after.Spec.HostNetwork).To(BeNil())
		Expect(after.Spec.AgentTolerations).To(BeEmpty())
		Expect(after.Spec.AgentNamespace).To(BeEmpty())
		got := &clusterv1.Cluster{}
		Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(victim), got)).To(Succeed())
		for _, a := range []string{capi.HostNetworkAnnotation, capi.AgentTolerationsAnnotation, capi.AgentNamespaceAnnotation} {
			Expect(got.Annotations).NotTo(HaveKey(a))
		}

		By("granted configure-agent, the writer sets them, and the manager honours them")
		grantCAPIConfigureAgent(ns)
		Eventually(func() error {
			c := &clusterv1.Cluster{}
			if err := writer.Get(ctx, client.ObjectKeyFromObject(victim), c); err != nil {
				return err
			}
			base := c.DeepCopy()
			metav1.SetMetaDataAnnotation(&c.ObjectMeta, capi.HostNetworkAnnotation, "true")
			return writer.Patch(ctx, c, client.MergeFrom(base))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
		Eventually(func(g Gomega) {
			got := &fleet.Cluster{}
			g.Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(victim), got)).To(Succeed())
			g.Expect(got.Spec.HostNetwork).To(Equal(ptr.To(true)))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	})
})

// installCAPI installs Cluster API's CRDs into the upstream cluster, after
// the manager started, and waits until they are served.
func installCAPI() {
	GinkgoHelper()
	ctx := env.Ctx
	scheme := runtime.NewScheme()
	Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	admin, err := client.New(env.Upstream.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	crds, err := controlplane.CAPICRDs()
	Expect(err).NotTo(HaveOccurred())
	for _, crd := range crds {
		Expect(client.IgnoreAlreadyExists(admin.Create(ctx, crd))).To(Succeed())
	}
	Eventually(func(g Gomega) {
		for _, crd := range crds {
			got := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(crd), got)).To(Succeed())
			established := false
			for _, c := range got.Status.Conditions {
				established = established || c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
			}
			g.Expect(established).To(BeTrue(), "CRD %s established", crd.Name)
		}
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
}

// capiWriter is a ServiceAccount of ns that may write Cluster API Clusters
// there, and nothing else.
func capiWriter(ns string) client.Client {
	GinkgoHelper()
	ctx := env.Ctx
	meta := metav1.ObjectMeta{Namespace: ns, Name: "capi-writer"}
	Expect(env.Admin.Create(ctx, &rbacv1.Role{ObjectMeta: meta, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{clusterv1.GroupVersion.Group}, Resources: []string{"clusters"},
		Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}})).To(Succeed())
	Expect(env.Admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: meta,
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: meta.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: meta.Name}}})).To(Succeed())
	c, _, err := framework.ServiceAccountClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), ns, meta.Name)
	Expect(err).NotTo(HaveOccurred())
	Eventually(func() error {
		return c.List(ctx, &clusterv1.ClusterList{}, client.InNamespace(ns))
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed(), "the writer's Role is in force")
	return c
}

// grantCAPIConfigureAgent gives the capi-writer of ns the verb
// configure-agent on the fleet Clusters of ns.
func grantCAPIConfigureAgent(ns string) {
	GinkgoHelper()
	meta := metav1.ObjectMeta{Namespace: ns, Name: "capi-writer-configure-agent"}
	Expect(env.Admin.Create(env.Ctx, &rbacv1.Role{ObjectMeta: meta,
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{fleet.GroupVersion.Group}, Resources: []string{"clusters"},
			Verbs: []string{install.ConfigureAgentVerb}}}})).To(Succeed())
	Expect(env.Admin.Create(env.Ctx, &rbacv1.RoleBinding{ObjectMeta: meta,
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: meta.Name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: "capi-writer"}}})).To(Succeed())
}
