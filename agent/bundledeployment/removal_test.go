package bundledeployment_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/conditions"
)

// What removing a bundle deletes downstream, and what it keeps, follows
// Fleet's agent: CRDs are rendered with helm.sh/resource-policy: keep unless
// deleteCRDResources (Fleet's helmdeployer post-renderer), so neither an
// uninstall nor an upgrade that drops them deletes them, and with them every
// custom resource of their kind; keepResources only forgets the release.

// crd is a namespaced CustomResourceDefinition of kind in group
// example.com.
func crd(plural, kind string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[1]s.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: %[1]s, singular: %[3]s, kind: %[2]s}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`, plural, kind, plural[:len(plural)-1])
}

// deployWith creates a BundleDeployment of files with opts and waits until
// it is Ready.
func deployWith(ctx context.Context, t *testing.T, name string, files map[string]string, opts fleet.BundleDeploymentOptions) *fleet.BundleDeployment {
	t.Helper()
	g := NewWithT(t)
	id := newContent(ctx, t, files)
	bd := &fleet.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: clusterNamespace, Name: name, Labels: map[string]string{
			fleet.BundleNameLabel: name, fleet.BundleNamespaceLabel: fleet.DefaultWorkspace,
		}},
		Spec: fleet.BundleDeploymentSpec{DeploymentID: id, StagedDeploymentID: id, Options: opts},
	}
	g.Expect(up.Create(ctx, bd)).To(Succeed())
	t.Cleanup(func() { _ = client.IgnoreNotFound(up.Delete(context.Background(), bd)) })
	waitReady(ctx, t, bd, id)
	return bd
}

func waitReady(ctx context.Context, t *testing.T, bd *fleet.BundleDeployment, id string) {
	t.Helper()
	NewWithT(t).Eventually(func(g Gomega) {
		got := get(ctx, g, bd)
		g.Expect(got.Status.AppliedDeploymentID).To(Equal(id))
		g.Expect(conditions.IsTrue(got, fleet.ConditionReady)).To(BeTrue(), "Ready: %+v", conditions.Get(got, fleet.ConditionReady))
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "BundleDeployment %s to become Ready", bd.Name)
}

// removeAndWaitUninstalled deletes bd and waits until its release records
// are gone downstream: the uninstall, and whatever it deletes, is then done.
func removeAndWaitUninstalled(ctx context.Context, t *testing.T, bd *fleet.BundleDeployment, releaseNamespace string) {
	t.Helper()
	g := NewWithT(t)
	g.Expect(up.Delete(ctx, bd)).To(Succeed())
	g.Eventually(func(g Gomega) {
		list := &corev1.SecretList{}
		g.Expect(down.List(ctx, list, client.InNamespace(releaseNamespace), client.MatchingLabels{"owner": "helm", "name": bd.Name})).To(Succeed())
		g.Expect(list.Items).To(BeEmpty())
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "the release of %s to be removed", bd.Name)
}

// createCustomResource creates, as a user would, a custom resource of kind
// in namespace downstream, once the API server serves the kind.
func createCustomResource(ctx context.Context, t *testing.T, kind, namespace, name string) *unstructured.Unstructured {
	t.Helper()
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: kind})
	u.SetNamespace(namespace)
	u.SetName(name)
	u.Object["spec"] = map[string]interface{}{"owner": "a user"}
	NewWithT(t).Eventually(func() error {
		return down.Create(ctx, u.DeepCopy())
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "creating %s %s/%s", kind, namespace, name)
	return u
}

func exists(ctx context.Context, g Gomega, obj client.Object) bool {
	err := down.Get(ctx, client.ObjectKeyFromObject(obj), obj)
	if apierrors.IsNotFound(err) {
		return false
	}
	g.Expect(err).NotTo(HaveOccurred())
	return true
}

func crdObject(plural string) client.Object {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"})
	u.SetName(plural + ".example.com")
	return u
}

func removingABundleKeepsItsCRDs(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	bd := deployWith(ctx, t, "crd-keep", map[string]string{"crd.yaml": crd("widgets", "Widget"), "cm.yaml": appConfig},
		fleet.BundleDeploymentOptions{DefaultNamespace: "crd-keep"})
	cr := createCustomResource(ctx, t, "Widget", "crd-keep", "mine")
	def := crdObject("widgets")
	g.Expect(exists(ctx, g, def)).To(BeTrue())
	g.Expect(def.GetAnnotations()).To(HaveKeyWithValue("helm.sh/resource-policy", "keep"))

	removeAndWaitUninstalled(ctx, t, bd, "crd-keep")
	g.Expect(exists(ctx, g, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "crd-keep", Name: "app-config"}})).
		To(BeFalse(), "the bundle's ConfigMap is uninstalled")
	g.Expect(exists(ctx, g, crdObject("widgets"))).To(BeTrue(), "the bundle's CRD stays")
	g.Expect(exists(ctx, g, cr)).To(BeTrue(), "the user's custom resource stays")
}

func removingABundleWithDeleteCRDResourcesDeletesThem(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	bd := deployWith(ctx, t, "crd-delete", map[string]string{"crd.yaml": crd("gadgets", "Gadget")},
		fleet.BundleDeploymentOptions{DefaultNamespace: "crd-delete", DeleteCRDResources: true})
	cr := createCustomResource(ctx, t, "Gadget", "crd-delete", "mine")
	def := crdObject("gadgets")
	g.Expect(exists(ctx, g, def)).To(BeTrue())
	g.Expect(def.GetAnnotations()).NotTo(HaveKey("helm.sh/resource-policy"))

	removeAndWaitUninstalled(ctx, t, bd, "crd-delete")
	g.Eventually(func(g Gomega) {
		g.Expect(exists(ctx, g, crdObject("gadgets"))).To(BeFalse(), "the CRD")
		g.Expect(exists(ctx, g, cr)).To(BeFalse(), "the custom resource")
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "deleteCRDResources to delete the CRD and its custom resources")
}

func aCRDDroppedFromTheBundleStays(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	// Drift correction is on: the dropped CRD, still labelled for the
	// release, must not be taken for an extra object and deleted.
	opts := fleet.BundleDeploymentOptions{DefaultNamespace: "crd-drop", CorrectDrift: &fleet.CorrectDrift{Enabled: true}}
	bd := deployWith(ctx, t, "crd-drop", map[string]string{"a.yaml": crd("sprockets", "Sprocket"), "b.yaml": crd("cogs", "Cog")}, opts)
	cr := createCustomResource(ctx, t, "Cog", "crd-drop", "mine")

	next := newContent(ctx, t, map[string]string{"a.yaml": crd("sprockets", "Sprocket")})
	g.Eventually(func() error {
		latest := &fleet.BundleDeployment{}
		if err := up.Get(ctx, client.ObjectKeyFromObject(bd), latest); err != nil {
			return err
		}
		latest.Spec.DeploymentID, latest.Spec.StagedDeploymentID = next, next
		return up.Update(ctx, latest)
	}).WithTimeout(10 * time.Second).Should(Succeed())
	waitReady(ctx, t, bd, next)
	g.Eventually(func(g Gomega) {
		got := get(ctx, g, bd)
		g.Expect(got.Status.NonModified).To(BeTrue(), "modified: %+v", got.Status.ModifiedStatus)
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "the kept CRD not to count as drift")
	g.Expect(exists(ctx, g, crdObject("cogs"))).To(BeTrue(), "the dropped CRD stays")
	g.Expect(exists(ctx, g, cr)).To(BeTrue(), "its custom resources stay")
}

func keepResourcesKeepsObjectsAndNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	// deleteNamespace would delete what keepResources keeps: the namespace
	// stays too.
	bd := deployWith(ctx, t, "kept", map[string]string{"cm.yaml": appConfig},
		fleet.BundleDeploymentOptions{DefaultNamespace: "kept-ns", KeepResources: true, DeleteNamespace: true})

	removeAndWaitUninstalled(ctx, t, bd, "kept-ns")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "kept-ns", Name: "app-config"}}
	g.Expect(exists(ctx, g, cm)).To(BeTrue(), "keepResources keeps the ConfigMap")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "kept-ns"}}
	g.Expect(exists(ctx, g, ns)).To(BeTrue())
	g.Expect(ns.DeletionTimestamp).To(BeNil(), "keepResources keeps the namespace")
}

func deleteNamespaceDeletesOnlyUnprotectedNamespaces(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	gone := deployWith(ctx, t, "ns-gone", map[string]string{"cm.yaml": appConfig},
		fleet.BundleDeploymentOptions{DefaultNamespace: "ns-gone", DeleteNamespace: true})
	protected := deployWith(ctx, t, "ns-protected", map[string]string{"cm.yaml": appConfig},
		fleet.BundleDeploymentOptions{DefaultNamespace: "fleet-default", DeleteNamespace: true})
	plain := deployWith(ctx, t, "ns-plain", map[string]string{"cm.yaml": appConfig},
		fleet.BundleDeploymentOptions{DefaultNamespace: "ns-plain"})

	removeAndWaitUninstalled(ctx, t, gone, "ns-gone")
	removeAndWaitUninstalled(ctx, t, protected, "fleet-default")
	removeAndWaitUninstalled(ctx, t, plain, "ns-plain")
	// Without a controller manager downstream a deleted namespace stays
	// Terminating: its deletionTimestamp tells it was deleted.
	g.Eventually(func(g Gomega) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns-gone"}}
		g.Expect(!exists(ctx, g, ns) || ns.DeletionTimestamp != nil).To(BeTrue())
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "deleteNamespace to delete ns-gone")
	for _, name := range []string{"fleet-default", "ns-plain"} {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
		g.Expect(exists(ctx, g, ns)).To(BeTrue(), name)
		g.Expect(ns.DeletionTimestamp).To(BeNil(), "namespace %s is kept", name)
	}
}
