package downstreamresource_test

import (
	"context"
	"crypto/ecdh"
	"encoding/base64"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/downstreamresource"
	"github.com/gitfleet/fleet/internal/sealing"
	"github.com/gitfleet/fleet/internal/secretmeta"
	"github.com/gitfleet/fleet/test/envtest"
)

// secretValue is the value no object but the source may hold in plain text.
const secretValue = "pa55-w0rd-only-the-source-holds"

var env *envtest.Environment

func TestMain(m *testing.M) {
	os.Exit(envtest.Run(context.Background(), envtest.RunInput{
		M:    m,
		Name: "downstreamresource",
		SetupReconcilers: func(ctx context.Context, mgr ctrl.Manager) error {
			secrets, err := secretmeta.ForManager(mgr)
			if err != nil {
				return err
			}
			return (&downstreamresource.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Secrets: secrets}).SetupWithManager(ctx, mgr)
		},
		SetupEnv: func(e *envtest.Environment) { env = e },
	}))
}

// agent is one cluster namespace with its agent's key published on its
// check-in Lease, as the agent's Heartbeat does.
type agent struct {
	namespace string
	key       *ecdh.PrivateKey
}

func newAgent(t *testing.T, prefix string) *agent {
	t.Helper()
	g := NewWithT(t)
	ns, err := env.CreateNamespace(t.Context(), prefix)
	g.Expect(err).NotTo(HaveOccurred())
	a := &agent{namespace: ns.Name}
	a.rotate(t)
	return a
}

// rotate makes a new key and publishes it.
func (a *agent) rotate(t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	key, err := sealing.NewKey()
	g.Expect(err).NotTo(HaveOccurred())
	a.key = key
	lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: a.namespace, Name: fleet.AgentLeaseName}}
	_, err = ctrl.CreateOrUpdate(t.Context(), env.Client, lease, func() error {
		lease.Annotations = map[string]string{fleet.SealingKeyAnnotation: sealing.EncodePublicKey(key.PublicKey())}
		return nil
	})
	g.Expect(err).NotTo(HaveOccurred())
}

func bundleDeployment(t *testing.T, a *agent, workspace, name string, sources ...fleet.DownstreamResource) *fleet.BundleDeployment {
	t.Helper()
	bd := &fleet.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: a.namespace, Name: name, Labels: map[string]string{
			fleet.BundleNamespaceLabel: workspace, fleet.BundleNameLabel: name,
		}},
		Spec: fleet.BundleDeploymentSpec{DeploymentID: "s-1:1", Options: fleet.BundleDeploymentOptions{DownstreamResources: sources}},
	}
	NewWithT(t).Expect(env.Create(t.Context(), bd)).To(Succeed())
	return bd
}

// sealed waits until bd is sealed to a's current key with no source
// missing but those named, and returns it.
func sealed(t *testing.T, a *agent, bd *fleet.BundleDeployment, missing ...string) *fleet.SealedResources {
	t.Helper()
	got := &fleet.BundleDeployment{}
	NewWithT(t).Eventually(func(g Gomega) {
		g.Expect(env.Get(t.Context(), client.ObjectKeyFromObject(bd), got)).To(Succeed())
		g.Expect(got.Spec.SealedResources).NotTo(BeNil())
		g.Expect(got.Spec.SealedResources.Recipient).To(Equal(sealing.Fingerprint(a.key.PublicKey())))
		g.Expect(got.Spec.SealedResources.Missing).To(ConsistOf(missing))
	}).WithTimeout(20*time.Second).Should(Succeed(), "BundleDeployment %s sealed to its agent's key", bd.Name)
	return got.Spec.SealedResources
}

func TestDownstreamResourcesAreSealedToTheirClusterOnly(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ws, err := env.CreateNamespace(ctx, "workspace")
	g.Expect(err).NotTo(HaveOccurred())
	source := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ws.Name, Name: "db"}, Data: map[string][]byte{"password": []byte(secretValue)}}
	g.Expect(env.Create(ctx, source)).To(Succeed())
	g.Expect(env.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ws.Name, Name: "settings"}, Data: map[string]string{"mode": "prod"}})).To(Succeed())
	onlyB := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ws.Name, Name: "only-b"}, StringData: map[string]string{"k": "v1"}}
	g.Expect(env.Create(ctx, onlyB)).To(Succeed())

	a, b := newAgent(t, "cluster-a"), newAgent(t, "cluster-b")
	both := []fleet.DownstreamResource{{Kind: "Secret", Name: "db"}, {Kind: "ConfigMap", Name: "settings"}}
	bdA := bundleDeployment(t, a, ws.Name, "app", both...)
	bdB := bundleDeployment(t, b, ws.Name, "app", slices.Concat(both, []fleet.DownstreamResource{{Kind: "Secret", Name: "only-b"}})...)

	sealA := sealed(t, a, bdA)
	p, err := sealing.Open([]*ecdh.PrivateKey{a.key}, a.namespace, "app", sealA.Data)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Resources).To(HaveLen(2))
	g.Expect(p.Resources[0].Data).To(HaveKeyWithValue("password", []byte(secretValue)))
	g.Expect(p.Resources[1].StringData).To(HaveKeyWithValue("mode", "prod"))
	sealB := sealed(t, b, bdB)

	// B's agent, with its own key, cannot open A's seal: neither where it
	// is nor copied into its own cluster namespace.
	_, err = sealing.Open([]*ecdh.PrivateKey{b.key}, a.namespace, "app", sealA.Data)
	g.Expect(err).To(HaveOccurred())
	_, err = sealing.Open([]*ecdh.PrivateKey{b.key}, b.namespace, "app", sealA.Data)
	g.Expect(err).To(HaveOccurred())
	// Nor does A's own key open it once moved to another namespace.
	_, err = sealing.Open([]*ecdh.PrivateKey{a.key}, b.namespace, "app", sealA.Data)
	g.Expect(err).To(HaveOccurred())

	assertNowhereInPlainText(t, source)

	// A source only B uses changes: B is sealed again, A is not touched.
	before := &fleet.BundleDeployment{}
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(bdA), before)).To(Succeed())
	onlyB.StringData = map[string]string{"k": "v2"}
	g.Expect(env.Update(ctx, onlyB)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &fleet.BundleDeployment{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(bdB), got)).To(Succeed())
		g.Expect(got.Spec.SealedResources.Sources).NotTo(Equal(sealB.Sources))
	}).WithTimeout(20*time.Second).Should(Succeed(), "B sealed again after its source changed")
	after := &fleet.BundleDeployment{}
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(bdA), after)).To(Succeed())
	g.Expect(after.ResourceVersion).To(Equal(before.ResourceVersion), "A does not use only-b: not sealed again")

	// A's agent rotates its key: A is sealed to the new one.
	a.rotate(t)
	sealed(t, a, bdA)
}

func TestAMissingSourceIsNamedAndPickedUpWhenItAppears(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ws, err := env.CreateNamespace(ctx, "workspace-missing")
	g.Expect(err).NotTo(HaveOccurred())
	a := newAgent(t, "cluster-missing")
	bd := bundleDeployment(t, a, ws.Name, "late", fleet.DownstreamResource{Kind: "Secret", Name: "later"})
	sealed(t, a, bd, "Secret/later")
	g.Expect(env.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ws.Name, Name: "later"}, StringData: map[string]string{"k": "v"}})).To(Succeed())
	s := sealed(t, a, bd)
	g.Expect(s.Sources).To(HaveLen(1))

	// Dropping downstreamResources drops the seal.
	got := &fleet.BundleDeployment{}
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(bd), got)).To(Succeed())
	got.Spec.Options.DownstreamResources = nil
	g.Expect(env.Update(ctx, got)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(bd), got)).To(Succeed())
		g.Expect(got.Spec.SealedResources).To(BeNil())
	}).WithTimeout(20 * time.Second).Should(Succeed())
}

// assertNowhereInPlainText reads, as admin, every object of every listable
// kind the API server serves and finds the secret's value in none but the
// source (base64, as the API server returns a Secret's data, and plain).
func assertNowhereInPlainText(t *testing.T, source *corev1.Secret) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	_, lists, err := discovery.NewDiscoveryClientForConfigOrDie(env.Config).ServerGroupsAndResources()
	g.Expect(err).NotTo(HaveOccurred())
	needles := []string{secretValue, base64.StdEncoding.EncodeToString([]byte(secretValue))}
	seen := 0
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		g.Expect(err).NotTo(HaveOccurred())
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(gv.WithKind(r.Kind + "List"))
			if err := env.List(ctx, list); err != nil {
				continue
			}
			for _, o := range list.Items {
				seen++
				if o.GetKind() == "Secret" && o.GetNamespace() == source.Namespace && o.GetName() == source.Name {
					continue
				}
				raw, err := json.Marshal(o.Object)
				g.Expect(err).NotTo(HaveOccurred())
				for _, n := range needles {
					g.Expect(string(raw)).NotTo(ContainSubstring(n), "%s %s/%s holds the secret's value", o.GetKind(), o.GetNamespace(), o.GetName())
				}
			}
		}
	}
	g.Expect(seen).To(BeNumerically(">", 10), "objects were read")
}
