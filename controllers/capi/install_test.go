package capi_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/controllers/capi"
	"github.com/gitfleet/fleet/internal/capienroll"
	"github.com/gitfleet/fleet/internal/enqueue"
	"github.com/gitfleet/fleet/test/controlplane"
)

// A manager started where Cluster API is not installed turns enrollment on
// once Cluster API's CRDs appear, without a restart: the whole manager as
// controllers.Setup wires it, on a control plane of its own.
func TestClusterAPIInstalledAfterTheManagerStarts(t *testing.T) {
	g := NewWithT(t)
	cp, err := controlplane.Start(controlplane.Options{Name: "capi-later"})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = cp.Stop() })
	scheme := controllers.Scheme()
	g.Expect(apiextensionsv1.AddToScheme(scheme)).To(Succeed())
	admin, err := cp.Client(scheme)
	g.Expect(err).NotTo(HaveOccurred())

	// The package's other manager runs controllers of the same names.
	cfg := enqueue.ControllerDefaults()
	cfg.SkipNameValidation = ptr.To(true)
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{Scheme: controllers.Scheme(), Controller: cfg,
		Cache: controllers.CacheOptions(controllers.Options{}), Metrics: metricsserver.Options{BindAddress: "0"}})
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(t.Context())
	g.Expect(controllers.Setup(ctx, mgr, controllers.Options{APIServerURL: cp.Config.Host, APIServerCA: cp.Config.CAData,
		DisableLocalCluster: true, Workers: 2, CAPIInstallCheckInterval: 200 * time.Millisecond})).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("stopping the manager: %v", err)
		}
	})
	g.Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())
	served, err := capienroll.Served(discoveryOf(t, cp))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(served).To(BeFalse(), "no Cluster API yet")

	crds, err := controlplane.CAPICRDs()
	g.Expect(err).NotTo(HaveOccurred())
	for _, crd := range crds {
		g.Expect(admin.Create(ctx, crd)).To(Succeed())
	}
	g.Eventually(func(g Gomega) {
		for _, crd := range crds {
			got := &apiextensionsv1.CustomResourceDefinition{}
			g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(crd), got)).To(Succeed())
			established := false
			for _, c := range got.Status.Conditions {
				established = established || c.Type == apiextensionsv1.Established && c.Status == apiextensionsv1.ConditionTrue
			}
			g.Expect(established).To(BeTrue(), "CRD %s established", crd.Name)
		}
	}).WithTimeout(30 * time.Second).Should(Succeed())

	installed := time.Now()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "late"}}
	g.Expect(admin.Create(ctx, ns)).To(Succeed())
	c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "first", Labels: map[string]string{"env": "dev"}},
		Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 6443}}}
	g.Expect(admin.Create(ctx, c)).To(Succeed())
	g.Expect(admin.Status().Patch(ctx, c, client.RawPatch(types.MergePatchType,
		[]byte(`{"status":{"initialization":{"controlPlaneInitialized":true}}}`)))).To(Succeed())
	g.Expect(admin.Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: capi.KubeconfigSecretName("first"), Labels: map[string]string{clusterv1.ClusterNameLabel: "first"}},
		Type:       clusterv1.ClusterSecretType,
		Data:       map[string][]byte{fleet.KubeConfigSecretValueKey: []byte("not a kubeconfig")},
	})).To(Succeed())

	fc := &fleet.Cluster{}
	g.Eventually(func() error { return admin.Get(ctx, client.ObjectKeyFromObject(c), fc) }).WithTimeout(60*time.Second).
		Should(Succeed(), "the Cluster API Cluster enrolled by the manager that started without Cluster API")
	t.Logf("Enrolled %s after Cluster API's CRDs were established (check interval 200ms)", time.Since(installed).Round(time.Millisecond))
	g.Expect(fc.Labels).To(HaveKeyWithValue("env", "dev"))
	g.Eventually(func(g Gomega) *metav1.Condition {
		got := &clusterv1.Cluster{}
		g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
		for i := range got.Status.Conditions {
			if got.Status.Conditions[i].Type == capi.ConditionFleetAgentReady {
				return &got.Status.Conditions[i]
			}
		}
		return nil
	}).WithTimeout(30*time.Second).Should(And(Not(BeNil()), HaveField("Reason", fleet.ReasonFailed),
		HaveField("Message", ContainSubstring("KubeconfigInvalid"))), "the import controller took it from there")
}

func discoveryOf(t *testing.T, cp *controlplane.ControlPlane) discovery.DiscoveryInterface {
	t.Helper()
	d, err := discovery.NewDiscoveryClientForConfig(cp.Config)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return d
}
