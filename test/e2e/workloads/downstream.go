package workloads

import (
	"crypto/ecdh"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/dynamic"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/kinds"
	"github.com/gitfleet/fleet/agent/sealkey"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/sealing"
)

// downstreamNamespace is where the downstreamResources spec deploys.
const downstreamNamespace = "secrets"

// copySet names the copies of one spec's sources downstream: a Secret
// holding "password" and a ConfigMap holding "greeting", in ns.
type copySet struct{ ns, secret, configMap string }

// bundleCopies are the copies of the Bundle spec.
var bundleCopies = copySet{ns: downstreamNamespace, secret: "db", configMap: "settings"}

// appWithEnvFrom is a Deployment whose container reads the copied Secret
// and ConfigMap as its environment.
func appWithEnvFrom() string {
	return deployment("app", "nginx:1.27", 1, "") + `        envFrom:
        - secretRef: {name: db}
        - configMapRef: {name: settings}
`
}

// downstreamResources: a Bundle naming a Secret and a ConfigMap of its
// namespace in downstreamResources deploys, on both clusters, a Deployment
// that reads them; the copies follow a change of the source, go when a
// cluster is no longer targeted (and stay with keepResources); an admin of
// the manager finds the Secret's value in no object; the other cluster's
// agent, with its own credential, can neither read this cluster's
// BundleDeployment nor open its seal.
func downstreamResources(f *fixture) {
	value := fmt.Sprintf("pw-%d-never-in-plain-text", time.Now().UnixNano())
	src := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: "db"}, Data: map[string][]byte{"password": []byte(value)}}
	Expect(f.admin.Create(f.ctx, src)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(f.admin.Delete(f.ctx, src))).To(Succeed()) })
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: "settings"}, Data: map[string]string{"greeting": "hello"}}
	Expect(f.admin.Create(f.ctx, cm)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(f.admin.Delete(f.ctx, cm))).To(Succeed()) })

	f.newBundle("secrets", fleet.BundleSpec{
		BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: downstreamNamespace, CreateNamespace: ptr.To(true),
			DownstreamResources: []fleet.DownstreamResource{{Kind: "Secret", Name: "db"}, {Kind: "ConfigMap", Name: "settings"}}},
		Resources: []fleet.BundleResource{res("app.yaml", appWithEnvFrom())},
		Targets:   targetAll(),
	})
	for _, c := range f.clusters {
		c.waitState("secrets", fleet.Ready, 90*time.Second)
		c.waitCopies(bundleCopies, value, "hello")
		runningApp(c, downstreamNamespace, "app")
	}

	// A change of the source reaches both clusters.
	value2 := value + "-rotated"
	Eventually(func() error {
		s := &corev1.Secret{}
		if err := f.admin.Get(f.ctx, client.ObjectKeyFromObject(src), s); err != nil {
			return err
		}
		s.Data["password"] = []byte(value2)
		return f.admin.Update(f.ctx, s)
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	for _, c := range f.clusters {
		c.waitCopies(bundleCopies, value2, "hello")
	}

	f.valueNowhere(value2, client.ObjectKeyFromObject(src), "secrets")
	f.otherAgentCannotOpen(f.clusters[0], f.clusters[1], "secrets", 2)

	// Un-targeting c1 removes its copies; c0 keeps them.
	f.updateBundle("secrets", func(b *fleet.Bundle) { b.Spec.Targets = targetName(f.clusters[0].name) })
	f.clusters[1].waitNoCopies(bundleCopies)
	f.clusters[0].waitCopies(bundleCopies, value2, "hello")

	// With keepResources, un-targeting c0 leaves its copies in place.
	f.updateBundle("secrets", func(b *fleet.Bundle) { b.Spec.KeepResources = true })
	// The BundleDeployment read before the manager wrote keepResources is
	// Ready already: wait for the one that carries it, then for the agent
	// to have applied it (the release is kept only when installed so).
	Eventually(func() bool { bd := f.clusters[0].bd("secrets"); return bd != nil && bd.Spec.Options.KeepResources }, 60*time.Second, 250*time.Millisecond).
		Should(BeTrue(), "keepResources reaches %s's BundleDeployment", f.clusters[0].name)
	f.clusters[0].waitState("secrets", fleet.Ready, 60*time.Second)
	f.updateBundle("secrets", func(b *fleet.Bundle) { b.Spec.Targets = targetName("nobody") })
	Eventually(func() *fleet.BundleDeployment { return f.clusters[0].bd("secrets") }, 60*time.Second, 250*time.Millisecond).Should(BeNil())
	Consistently(func(g Gomega) { f.clusters[0].copiesAre(g, bundleCopies, value2, "hello") }, 10*time.Second, time.Second).Should(Succeed())
}

// runningApp waits for the app reading the copies to run.
func runningApp(c *cluster, ns, app string) {
	GinkgoHelper()
	Eventually(func(g Gomega) { runningOnSimulatedNodes(g, c.pods(ns, app), 1) }, 60*time.Second, 250*time.Millisecond).Should(Succeed())
}

// copiesAre checks the copies of the source Secret and ConfigMap downstream.
func (c *cluster) copiesAre(g Gomega, set copySet, password, greeting string) {
	s := &corev1.Secret{}
	g.Expect(c.Local.Get(c.ctx, types.NamespacedName{Namespace: set.ns, Name: set.secret}, s)).To(Succeed())
	g.Expect(string(s.Data["password"])).To(Equal(password), "Secret %s/%s on %s", set.ns, set.secret, c.name)
	m := &corev1.ConfigMap{}
	g.Expect(c.Local.Get(c.ctx, types.NamespacedName{Namespace: set.ns, Name: set.configMap}, m)).To(Succeed())
	g.Expect(m.Data).To(HaveKeyWithValue("greeting", greeting), "ConfigMap %s/%s on %s", set.ns, set.configMap, c.name)
}

func (c *cluster) waitCopies(set copySet, password, greeting string) {
	GinkgoHelper()
	Eventually(func(g Gomega) { c.copiesAre(g, set, password, greeting) }, 60*time.Second, 250*time.Millisecond).Should(Succeed(),
		"copies on %s; agent log:\n%s", c.name, c.Agent.Tail(4000))
}

func (c *cluster) waitNoCopies(set copySet) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		err := c.Local.Get(c.ctx, types.NamespacedName{Namespace: set.ns, Name: set.secret}, &corev1.Secret{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Secret %s/%s on %s: %v", set.ns, set.secret, c.name, err)
		err = c.Local.Get(c.ctx, types.NamespacedName{Namespace: set.ns, Name: set.configMap}, &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "ConfigMap %s/%s on %s: %v", set.ns, set.configMap, c.name, err)
	}, 60*time.Second, 250*time.Millisecond).Should(Succeed())
}

// valueNowhere lists, as the manager's admin, every object of every
// listable resource of the manager's API server, in every namespace, and
// finds the value, plain or base64, in none but the source Secret itself;
// the BundleDeployments of bundle carry the seal.
func (f *fixture) valueNowhere(value string, source types.NamespacedName, bundle string) {
	GinkgoHelper()
	cfg := f.clusters[0].Upstream.Config
	disco, err := discovery.NewDiscoveryClientForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	dyn, err := dynamic.NewForConfig(cfg)
	Expect(err).NotTo(HaveOccurred())
	lists, err := disco.ServerPreferredResources()
	Expect(err).NotTo(HaveOccurred())
	needles := []string{value, base64.StdEncoding.EncodeToString([]byte(value))}
	seen := 0
	for _, l := range lists {
		gv, err := schema.ParseGroupVersion(l.GroupVersion)
		Expect(err).NotTo(HaveOccurred())
		for _, r := range l.APIResources {
			if strings.Contains(r.Name, "/") || !slices.Contains(r.Verbs, "list") {
				continue
			}
			objs, err := dyn.Resource(gv.WithResource(r.Name)).List(f.ctx, metav1.ListOptions{})
			Expect(err).NotTo(HaveOccurred(), "listing %s", r.Name)
			for _, o := range objs.Items {
				if gv.Group == "" && r.Name == "secrets" && o.GetNamespace() == source.Namespace && o.GetName() == source.Name {
					continue // the source
				}
				seen++
				b, err := json.Marshal(o.Object)
				Expect(err).NotTo(HaveOccurred())
				for _, n := range needles {
					Expect(string(b)).NotTo(ContainSubstring(n), "%s %s/%s holds the Secret's value", r.Name, o.GetNamespace(), o.GetName())
				}
			}
		}
	}
	Expect(seen).To(BeNumerically(">", 10), "objects read")
	// The BundleDeployments do carry the seal.
	for _, c := range f.clusters {
		bd := c.bd(bundle)
		Expect(bd).NotTo(BeNil(), "BundleDeployment %s of %s", bundle, c.name)
		Expect(bd.Spec.SealedResources).NotTo(BeNil())
		Expect(bd.Spec.SealedResources.Data).NotTo(BeEmpty())
	}
}

// otherAgentCannotOpen: b's agent, with its own credential, is refused a's
// BundleDeployment of bundle; handed a's seal anyway, its keys do not open
// it, while a's own keys do, and find the n sources sealed.
func (f *fixture) otherAgentCannotOpen(a, b *cluster, bundle string, n int) {
	GinkgoHelper()
	bClient, err := client.New(b.Cred.RESTConfig(), client.Options{Scheme: kinds.Scheme()})
	Expect(err).NotTo(HaveOccurred())
	err = bClient.Get(f.ctx, types.NamespacedName{Namespace: a.Cred.ClusterNamespace, Name: bundle}, &fleet.BundleDeployment{})
	Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s's agent reading %s's BundleDeployment: %v", b.name, a.name, err)

	bd := a.bd(bundle)
	_, err = sealing.Open(b.sealingKeys(), bd.Namespace, bd.Name, bd.Spec.SealedResources.Data)
	Expect(err).To(HaveOccurred(), "%s's keys open %s's seal", b.name, a.name)
	// Nor does b's own BundleDeployment name move a's seal over.
	_, err = sealing.Open(b.sealingKeys(), b.Cred.ClusterNamespace, bd.Name, bd.Spec.SealedResources.Data)
	Expect(err).To(HaveOccurred())
	p, err := sealing.Open(a.sealingKeys(), bd.Namespace, bd.Name, bd.Spec.SealedResources.Data)
	Expect(err).NotTo(HaveOccurred(), "%s's own keys open its seal", a.name)
	Expect(p.Resources).To(HaveLen(n))
}

// sealingKeys are the private keys the cluster's agent keeps downstream.
func (c *cluster) sealingKeys() []*ecdh.PrivateKey {
	GinkgoHelper()
	ns := c.SystemNamespace
	if ns == "" {
		ns = fleet.DefaultSystemNamespace
	}
	s := &corev1.Secret{}
	Expect(c.Local.Get(c.ctx, types.NamespacedName{Namespace: ns, Name: sealkey.SecretName}, s)).To(Succeed())
	var keys []*ecdh.PrivateKey
	for _, k := range []string{"current", "previous"} {
		if len(s.Data[k]) == 0 {
			continue
		}
		key, err := sealing.ParsePrivateKey(s.Data[k])
		Expect(err).NotTo(HaveOccurred())
		keys = append(keys, key)
	}
	Expect(keys).NotTo(BeEmpty())
	return keys
}
