package capi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/capi"
)

// enrolledWithDeployment enrolls a Cluster API Cluster and gives its fleet
// Cluster a BundleDeployment in its cluster namespace, as the bundle
// controller would.
func enrolledWithDeployment(t *testing.T, namespace, name string) (*clusterv1.Cluster, *fleet.Cluster, *fleet.BundleDeployment) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	c := capiCluster(t, namespace, name, true, nil)
	kubeconfigSecret(t, namespace, name)
	var fc *fleet.Cluster
	g.Eventually(func(g Gomega) string {
		var err error
		fc, err = fleetCluster(ctx, namespace, name)()
		g.Expect(err).NotTo(HaveOccurred())
		return fc.Status.Namespace
	}).WithTimeout(20*time.Second).ShouldNot(BeEmpty(), "enrolled, with its cluster namespace")
	g.Eventually(func(g Gomega) []string {
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
		return c.Finalizers
	}).WithTimeout(20 * time.Second).Should(ContainElement(fleet.CAPIEnrollmentFinalizer))
	bd := &fleet.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: fc.Status.Namespace, Name: "app"},
		Spec:       fleet.BundleDeploymentSpec{DeploymentID: "s-app:0123"},
	}
	g.Expect(env.CreateAndWait(ctx, bd)).To(Succeed())
	return c, fc, bd
}

// moveAway does to a Cluster API Cluster and its kubeconfig Secret what
// `clusterctl move` does on the management cluster it moves them from
// (cmd/clusterctl/client/cluster/mover.go): pause the Cluster, then for each
// object, the Secret first, add the delete-for-move annotation (a JSON
// patch that replaces all annotations), strip every finalizer, delete.
func moveAway(t *testing.T, c *clusterv1.Cluster, annotate bool) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(env.Patch(ctx, c, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":true}}`)))).To(Succeed())
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: capi.KubeconfigSecretName(c.Name)}}
	for _, obj := range []client.Object{secret, c} {
		if annotate {
			patch := fmt.Sprintf(`[{"op":"add","path":"/metadata/annotations","value":{%q:""}}]`, capi.DeleteForMoveAnnotation)
			g.Expect(env.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, []byte(patch)))).To(Succeed())
		}
		g.Expect(env.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":[]}}`)))).To(Succeed())
		g.Expect(env.Delete(ctx, obj)).To(Succeed())
	}
	g.Eventually(notFound(ctx, c)).WithTimeout(10 * time.Second).Should(BeTrue())
}

// kept checks that the fleet Cluster and its BundleDeployment stay as they
// were, and that the fleet Cluster says its Cluster API Cluster moved away.
func kept(ctx context.Context, t *testing.T, fc *fleet.Cluster, bd *fleet.BundleDeployment) {
	t.Helper()
	g := NewWithT(t)
	g.Eventually(fleetCluster(ctx, fc.Namespace, fc.Name)).WithTimeout(20*time.Second).
		Should(HaveField("Annotations", HaveKey(fleet.CAPIMovedAnnotation)), "the fleet Cluster says it moved away")
	g.Consistently(func(g Gomega) {
		got, err := fleetCluster(ctx, fc.Namespace, fc.Name)()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(got.UID).To(Equal(fc.UID), "the same fleet Cluster")
		g.Expect(got.DeletionTimestamp).To(BeNil(), "not being deleted")
		g.Expect(got.OwnerReferences).To(BeEmpty())
		gotBD := &fleet.BundleDeployment{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(bd), gotBD)).To(Succeed())
		g.Expect(gotBD.UID).To(Equal(bd.UID), "the same BundleDeployment")
		g.Expect(gotBD.DeletionTimestamp).To(BeNil())
	}).WithTimeout(3 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
}

func TestMoveKeepsTheFleetClusterAndItsDeployments(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := env.CreateNamespace(ctx, "capi-move")
	g.Expect(err).NotTo(HaveOccurred())

	t.Run("clusterctl move: annotate, strip finalizers, delete", func(t *testing.T) {
		c, fc, bd := enrolledWithDeployment(t, ns.Name, "moving")
		moveAway(t, c, true)
		kept(ctx, t, fc, bd)
	})
	t.Run("gone without the finalizer, no annotation", func(t *testing.T) {
		c, fc, bd := enrolledWithDeployment(t, ns.Name, "vanishing")
		moveAway(t, c, false)
		kept(ctx, t, fc, bd)
	})
}

func TestDeletionDeletesTheFleetClusterAndItsDeployments(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := env.CreateNamespace(ctx, "capi-delete")
	g.Expect(err).NotTo(HaveOccurred())
	c, fc, bd := enrolledWithDeployment(t, ns.Name, "deleted")

	g.Expect(env.Delete(ctx, c)).To(Succeed())
	g.Eventually(notFound(ctx, fc)).WithTimeout(20*time.Second).Should(BeTrue(), "the fleet Cluster deleted")
	g.Eventually(notFound(ctx, bd)).WithTimeout(20*time.Second).Should(BeTrue(), "its BundleDeployment deleted")
	g.Eventually(notFound(ctx, c)).WithTimeout(20*time.Second).Should(BeTrue(), "the finalizer removed")
}

func TestDropsTheOwnerReferenceOfEarlierEnrollments(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := env.CreateNamespace(ctx, "capi-migrate")
	g.Expect(err).NotTo(HaveOccurred())
	c := capiCluster(t, ns.Name, "earlier", true, func(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(true) })
	kubeconfigSecret(t, ns.Name, "earlier")
	// As an earlier version enrolled it: a controller reference, no
	// annotations.
	fc := &fleet.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "earlier", OwnerReferences: []metav1.OwnerReference{{
			APIVersion: clusterv1.GroupVersion.String(), Kind: "Cluster", Name: c.Name, UID: c.UID, Controller: ptr.To(true),
		}}},
		Spec: fleet.ClusterSpec{KubeConfigSecret: capi.KubeconfigSecretName("earlier")},
	}
	g.Expect(env.CreateAndWait(ctx, fc)).To(Succeed())

	g.Expect(env.Patch(ctx, c, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":false}}`)))).To(Succeed())
	g.Eventually(fleetCluster(ctx, ns.Name, "earlier")).WithTimeout(20 * time.Second).Should(And(
		HaveField("OwnerReferences", BeEmpty()),
		HaveField("Annotations", HaveKeyWithValue(capi.CAPIClusterUIDAnnotation, string(c.UID))),
		HaveField("UID", fc.UID),
	))
}
