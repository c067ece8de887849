package manageraddress_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/manageraddress"
	"github.com/gitfleet/fleet/internal/registration"
	"github.com/gitfleet/fleet/test/envtest"
)

const (
	url = "https://manager-new.example:6443"
	ca  = "-----BEGIN CERTIFICATE-----\nnew\n-----END CERTIFICATE-----\n"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	os.Exit(envtest.Run(context.Background(), envtest.RunInput{
		M:    m,
		Name: "manageraddress",
		SetupReconcilers: func(_ context.Context, mgr ctrl.Manager) error {
			return (&manageraddress.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
				APIServerURL: url, APIServerCA: []byte(ca)}).SetupWithManager(mgr)
		},
		SetupEnv: func(e *envtest.Environment) { env = e },
	}))
}

// cluster creates a Cluster in workspace and gives it its cluster namespace,
// as a grant does.
func cluster(t *testing.T, workspace, name, kubeconfigSecret string) string {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	clusterNS, err := env.CreateNamespace(ctx, "cluster-"+name)
	g.Expect(err).NotTo(HaveOccurred())
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: workspace, Name: name}, Spec: fleet.ClusterSpec{KubeConfigSecret: kubeconfigSecret}}
	g.Expect(env.Create(ctx, c)).To(Succeed())
	c.Status.Namespace = clusterNS.Name
	g.Expect(env.Status().Update(ctx, c)).To(Succeed())
	return clusterNS.Name
}

func address(ctx context.Context, namespace string) func(g Gomega) map[string]string {
	return func(g Gomega) map[string]string {
		cm := &corev1.ConfigMap{}
		g.Expect(env.Get(ctx, types.NamespacedName{Namespace: namespace, Name: registration.AddressConfigMap}, cm)).To(Succeed())
		return cm.Data
	}
}

func TestTheManagersAddressIsPublishedToTokenClusters(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ws, err := env.CreateNamespace(ctx, "workspace")
	g.Expect(err).NotTo(HaveOccurred())
	want := map[string]string{registration.AddressURLKey: url, registration.AddressCAKey: ca}

	clusterNS := cluster(t, ws.Name, "edge", "")
	g.Eventually(address(ctx, clusterNS)).WithTimeout(20*time.Second).Should(Equal(want), "published once the Cluster has its namespace")
	cm := &corev1.ConfigMap{}
	g.Expect(env.Get(ctx, types.NamespacedName{Namespace: clusterNS, Name: registration.AddressConfigMap}, cm)).To(Succeed())
	g.Expect(cm.Labels).To(HaveKeyWithValue(fleet.ManagedLabel, "true"))

	imported := cluster(t, ws.Name, "imported", "imported-kubeconfig")

	// The address a manager published before it moved is rewritten: here
	// one written before the Cluster got its namespace.
	movedNS, err := env.CreateNamespace(ctx, "cluster-moved")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: movedNS.Name, Name: registration.AddressConfigMap, Labels: map[string]string{fleet.ManagedLabel: "true"}},
		Data:       map[string]string{registration.AddressURLKey: "https://manager-old.example:6443"},
	})).To(Succeed())
	// One that fleet did not make is left alone.
	foreignNS, err := env.CreateNamespace(ctx, "cluster-foreign")
	g.Expect(err).NotTo(HaveOccurred())
	foreign := &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Namespace: foreignNS.Name, Name: registration.AddressConfigMap},
		Data:       map[string]string{registration.AddressURLKey: "https://elsewhere.example"},
	}
	g.Expect(env.Create(ctx, foreign)).To(Succeed())
	for name, ns := range map[string]string{"moved": movedNS.Name, "foreign": foreignNS.Name} {
		c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ws.Name, Name: name}}
		g.Expect(env.Create(ctx, c)).To(Succeed())
		c.Status.Namespace = ns
		g.Expect(env.Status().Update(ctx, c)).To(Succeed())
	}
	g.Eventually(address(ctx, movedNS.Name)).WithTimeout(20*time.Second).Should(Equal(want), "the new address replaces the old one")

	// Heard of together with the others: by now each was looked at.
	g.Consistently(func(g Gomega) {
		err := env.Get(ctx, types.NamespacedName{Namespace: imported, Name: registration.AddressConfigMap}, &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "an imported Cluster's agent gets its address from the import: %v", err)
		got := &corev1.ConfigMap{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(foreign), got)).To(Succeed())
		g.Expect(got.ResourceVersion).To(Equal(foreign.ResourceVersion), "a ConfigMap fleet did not make is not overwritten")
	}).WithTimeout(3 * time.Second).WithPolling(300 * time.Millisecond).Should(Succeed())
}

// A Cluster whose agent was told the current address at registration gets
// no ConfigMap; one told another address (the manager has moved since) does.
func TestAnAgentToldTheAddressAtRegistrationGetsNoConfigMap(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ws, err := env.CreateNamespace(ctx, "workspace-told")
	g.Expect(err).NotTo(HaveOccurred())
	made := map[string]string{}
	for name, told := range map[string]string{"told": url, "told-before": "https://manager-old.example:6443"} {
		ns, err := env.CreateNamespace(ctx, "cluster-"+name)
		g.Expect(err).NotTo(HaveOccurred())
		c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ws.Name, Name: name,
			Annotations: map[string]string{registration.AddressAnnotation: registration.AddressHash(told, []byte(ca))}}}
		g.Expect(env.Create(ctx, c)).To(Succeed())
		c.Status.Namespace = ns.Name
		g.Expect(env.Status().Update(ctx, c)).To(Succeed())
		made[name] = ns.Name
	}
	want := map[string]string{registration.AddressURLKey: url, registration.AddressCAKey: ca}
	g.Eventually(address(ctx, made["told-before"])).WithTimeout(20*time.Second).Should(Equal(want), "the manager moved since: published")
	// Heard of together: by now the other was looked at too.
	g.Consistently(func() bool {
		err := env.Get(ctx, types.NamespacedName{Namespace: made["told"], Name: registration.AddressConfigMap}, &corev1.ConfigMap{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(3*time.Second).WithPolling(300*time.Millisecond).Should(BeTrue(), "the agent has the address already")
}
