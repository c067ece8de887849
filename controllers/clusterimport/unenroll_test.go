package clusterimport_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/names"
)

// unenrollFixture is an imported Cluster with its agent installed into
// agentNS downstream, a BundleDeployment upstream and the record of the
// release the agent deployed from it downstream (in namespace apps), and
// a pod of the agent, as a kubelet would show it.
type unenrollFixture struct {
	cluster    *fleet.Cluster
	bd         *fleet.BundleDeployment
	release    *corev1.Secret
	pod        *corev1.Pod
	agentNS    string
	downstream client.Client
}

func newUnenrollFixture(t *testing.T, name string, keep string) *unenrollFixture {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := env.CreateNamespace(ctx, "unenroll")
	g.Expect(err).NotTo(HaveOccurred())
	f := &unenrollFixture{agentNS: "fleet-" + name}
	f.downstream, err = workload.Client(nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Create(ctx, kubeconfigSecret(t, ns.Name, name+"-kubeconfig", nil))).To(Succeed())
	f.cluster = importCluster(ns.Name, name, name+"-kubeconfig")
	f.cluster.Spec.AgentNamespace = f.agentNS
	if keep != "" {
		f.cluster.Annotations = map[string]string{fleet.KeepResourcesOnUnenrollAnnotation: keep}
	}
	g.Expect(env.CreateAndWait(ctx, f.cluster)).To(Succeed())
	g.Eventually(imported(ctx, f.cluster)).WithTimeout(30 * time.Second).Should(haveReason(metav1.ConditionTrue, fleet.ReasonApplied))
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(f.cluster), f.cluster)).To(Succeed())
	g.Expect(f.cluster.Finalizers).To(ContainElement(fleet.AgentRemovalFinalizer))

	clusterNS := names.ClusterNamespace(ns.Name, name)
	g.Expect(env.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterNS}})).To(Succeed())
	f.bd = &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: clusterNS, Name: "apps"}}
	g.Expect(env.Create(ctx, f.bd)).To(Succeed())
	apps := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "apps-" + name}}
	g.Expect(f.downstream.Create(ctx, apps)).To(Succeed())
	f.release = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: apps.Name, Name: "sh.helm.release.v1.apps.v1",
		Labels: map[string]string{"owner": "helm", "name": "apps", fleet.ManagedLabel: "true", fleet.ClusterNamespaceLabel: clusterNS}}}
	g.Expect(f.downstream.Create(ctx, f.release)).To(Succeed())
	f.pod = &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: f.agentNS, Name: "fleet-agent-0", Labels: map[string]string{"app": fleet.AgentName}},
		Spec: corev1.PodSpec{ServiceAccountName: fleet.AgentName, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "agent", Image: "fleet-agent"}}}}
	g.Expect(f.downstream.Create(ctx, f.pod)).To(Succeed())
	return f
}

func (f *unenrollFixture) exists(ctx context.Context, c client.Client, obj client.Object) func() bool {
	return func() bool {
		err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
		return !apierrors.IsNotFound(err)
	}
}

// agentRemoved checks that everything installed downstream is gone, the
// namespace being deleted (a bare control plane has no namespace
// controller to finish it).
func (f *unenrollFixture) agentRemoved(ctx context.Context, g Gomega) {
	meta := metav1.ObjectMeta{Namespace: f.agentNS, Name: fleet.AgentName}
	for _, o := range []client.Object{&appsv1.Deployment{ObjectMeta: meta}, &corev1.ServiceAccount{ObjectMeta: meta}, &corev1.ConfigMap{ObjectMeta: meta},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: fleet.AgentName + "-" + f.agentNS}}} {
		g.Expect(f.exists(ctx, f.downstream, o)()).To(BeFalse(), "%T %s downstream", o, client.ObjectKeyFromObject(o))
	}
	ns := &corev1.Namespace{}
	err := f.downstream.Get(ctx, types.NamespacedName{Name: f.agentNS}, ns)
	g.Expect(apierrors.IsNotFound(err) || err == nil && !ns.DeletionTimestamp.IsZero()).To(BeTrue(), "the agent namespace deleted: %v", err)
}

// By default deleting the Cluster stops and removes the agent before its
// BundleDeployments may go; the releases stay.
func TestDeletingAClusterRemovesTheAgentFirstAndKeepsReleases(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	f := newUnenrollFixture(t, "keep", "")

	g.Expect(env.Delete(ctx, f.cluster)).To(Succeed())
	g.Eventually(f.exists(ctx, f.downstream, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: f.agentNS, Name: fleet.AgentName}})).
		WithTimeout(20*time.Second).Should(BeFalse(), "the agent Deployment deleted")
	g.Consistently(func(g Gomega) []string {
		got := &fleet.Cluster{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(f.cluster), got)).To(Succeed())
		return got.Finalizers
	}).WithTimeout(2*time.Second).Should(ContainElement(fleet.AgentRemovalFinalizer), "held while the agent's pod still runs")

	g.Expect(f.downstream.Delete(ctx, f.pod, client.GracePeriodSeconds(0))).To(Succeed())
	g.Eventually(f.exists(ctx, env.Client, f.cluster)).WithTimeout(20*time.Second).Should(BeFalse(), "let go once the agent stopped")
	f.agentRemoved(ctx, g)
	g.Expect(f.exists(ctx, f.downstream, f.release)()).To(BeTrue(), "the release stays")
	g.Expect(f.exists(ctx, env.Client, f.bd)()).To(BeTrue(), "its deployments are the cluster controller's to delete, after")
}

// With keep-resources-on-unenroll "false" the deployments go first and the
// agent is removed once it has uninstalled its releases.
func TestDeletingAClusterCanUninstallItsReleasesFirst(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	f := newUnenrollFixture(t, "uninstall", "false")
	g.Expect(f.downstream.Delete(ctx, f.pod, client.GracePeriodSeconds(0))).To(Succeed())

	g.Expect(env.Delete(ctx, f.cluster)).To(Succeed())
	g.Eventually(f.exists(ctx, env.Client, f.bd)).WithTimeout(20*time.Second).Should(BeFalse(), "the deployments deleted first")
	g.Consistently(func(g Gomega) bool {
		g.Expect(f.exists(ctx, env.Client, f.cluster)()).To(BeTrue(), "held while a release is left")
		return f.exists(ctx, f.downstream, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: f.agentNS, Name: fleet.AgentName}})()
	}).WithTimeout(2*time.Second).Should(BeTrue(), "the agent stays to uninstall")

	// The agent uninstalls the release.
	g.Expect(f.downstream.Delete(ctx, f.release)).To(Succeed())
	g.Eventually(f.exists(ctx, env.Client, f.cluster)).WithTimeout(20 * time.Second).Should(BeFalse())
	f.agentRemoved(ctx, g)
}

// A Cluster whose kubeconfig is gone cannot reach its agent: it is let go,
// with a Warning event that says the agent was left.
func TestDeletingAClusterWithoutItsKubeconfigLetsItGo(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	f := newUnenrollFixture(t, "nokubeconfig", "")
	g.Expect(env.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: f.cluster.Namespace, Name: f.cluster.Spec.KubeConfigSecret}})).To(Succeed())
	g.Expect(env.Delete(ctx, f.cluster)).To(Succeed())
	g.Eventually(f.exists(ctx, env.Client, f.cluster)).WithTimeout(20 * time.Second).Should(BeFalse())
	g.Expect(f.exists(ctx, f.downstream, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: f.agentNS, Name: fleet.AgentName}})()).
		To(BeTrue(), "the agent left in place")
	g.Eventually(func(g Gomega) []string {
		list := &eventsv1.EventList{}
		g.Expect(env.List(ctx, list, client.InNamespace(f.cluster.Namespace))).To(Succeed())
		var reasons []string
		for _, e := range list.Items {
			if e.Regarding.Name == f.cluster.Name {
				reasons = append(reasons, e.Reason)
			}
		}
		return reasons
	}).WithTimeout(10 * time.Second).Should(ContainElement(fleet.ReasonAgentNotRemoved))
}

// A Cluster that stops naming a kubeconfig is no longer imported: the
// removal finalizer goes, so that deleting it later does not wait.
func TestClusterNoLongerImportedDropsTheRemovalFinalizer(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := env.CreateNamespace(ctx, "unimport")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Create(ctx, kubeconfigSecret(t, ns.Name, "kc", nil))).To(Succeed())
	c := importCluster(ns.Name, "unimported", "kc")
	c.Spec.AgentNamespace = "fleet-unimported"
	g.Expect(env.CreateAndWait(ctx, c)).To(Succeed())
	g.Eventually(func(g Gomega) []string {
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		return c.Finalizers
	}).WithTimeout(20 * time.Second).Should(ContainElement(fleet.AgentRemovalFinalizer))
	patch := client.MergeFrom(c.DeepCopy())
	c.Spec.KubeConfigSecret = ""
	g.Expect(env.Patch(ctx, c, patch)).To(Succeed())
	g.Eventually(func(g Gomega) []string {
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		return c.Finalizers
	}).WithTimeout(20 * time.Second).ShouldNot(ContainElement(fleet.AgentRemovalFinalizer))
}
