package bundledeployment_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/summary"
)

const appConfig = `apiVersion: v1
kind: ConfigMap
metadata:
  name: app-config
data:
  color: blue
`

// get reads a BundleDeployment back from the manager's API server.
func get(ctx context.Context, g Gomega, bd *fleet.BundleDeployment) *fleet.BundleDeployment {
	got := &fleet.BundleDeployment{}
	g.Expect(up.Get(ctx, client.ObjectKeyFromObject(bd), got)).To(Succeed())
	return got
}

// TestAgent runs the agent's BundleDeployment reconciler against the two
// control planes for its subtests, in order.
func TestAgent(t *testing.T) {
	runAgent(t)
	t.Run("deploys a manifest and uninstalls it when deleted", deploysAManifestAndUninstallsItWhenDeleted)
	t.Run("a chart that fails to render stalls until the BundleDeployment changes", aChartThatFailsToRenderStalls)
	t.Run("removing a bundle keeps its CRDs and users' custom resources", removingABundleKeepsItsCRDs)
	t.Run("with deleteCRDResources removing a bundle deletes its CRDs", removingABundleWithDeleteCRDResourcesDeletesThem)
	t.Run("a CRD dropped from a bundle stays, even with drift correction", aCRDDroppedFromTheBundleStays)
	t.Run("keepResources keeps the objects and the namespace", keepResourcesKeepsObjectsAndNamespace)
	t.Run("deleteNamespace deletes only unprotected namespaces", deleteNamespaceDeletesOnlyUnprotectedNamespaces)
	t.Run("createNamespace false waits for the namespace", createNamespaceFalseWaitsForTheNamespace)
	t.Run("allowedTargetNamespaceSelector waits for a labelled namespace", namespaceSelectorWaitsForTheLabels)
	t.Run("a not-ready object is reported in Fleet's shape", aNotReadyObjectIsReportedInFleetsShape)
}

const webDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec: {containers: [{name: web, image: nginx}]}
`

// aNotReadyObjectIsReportedInFleetsShape: a Deployment that never rolls out
// (no controller runs downstream) is listed in nonReadyStatus with Fleet's
// summary object, and the resources and counts say the same, as read raw
// from the API server.
func aNotReadyObjectIsReportedInFleetsShape(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	id := newContent(ctx, t, map[string]string{"web.yaml": webDeployment, "cm.yaml": appConfig})
	bd := newBundleDeployment(ctx, t, "shapes", id, "shapes")
	g.Eventually(func(g Gomega) {
		raw := &unstructured.Unstructured{}
		raw.SetGroupVersionKind(fleet.GroupVersion.WithKind("BundleDeployment"))
		g.Expect(up.Get(ctx, client.ObjectKeyFromObject(bd), raw)).To(Succeed())
		nonReady, _, _ := unstructured.NestedSlice(raw.Object, "status", "nonReadyStatus")
		g.Expect(nonReady).To(ConsistOf(And(
			HaveKeyWithValue("kind", "Deployment"), HaveKeyWithValue("name", "web"), HaveKeyWithValue("namespace", "shapes"),
			HaveKeyWithValue("summary", map[string]any{"state": "updating", "transitioning": true,
				"message": []any{"generation 1 not observed yet"}}),
		)))
		counts, _, _ := unstructured.NestedMap(raw.Object, "status", "resourceCounts")
		g.Expect(counts).To(Equal(map[string]any{"ready": int64(1), "desiredReady": int64(2), "notReady": int64(1),
			"waitApplied": int64(0), "modified": int64(0), "orphaned": int64(0), "missing": int64(0), "unknown": int64(0)}))
		resources, _, _ := unstructured.NestedSlice(raw.Object, "status", "resources")
		g.Expect(resources).To(HaveLen(2))
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "the Deployment reported not ready")
}

// createNamespaceFalseWaitsForTheNamespace: with createNamespace: false the
// agent creates no namespace: the deployment is refused with
// NamespaceMissing and a message saying what to do, until someone creates
// the namespace; then it deploys by itself.
func createNamespaceFalseWaitsForTheNamespace(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	id := newContent(ctx, t, map[string]string{"cm.yaml": appConfig})
	no := false
	bd := &fleet.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: clusterNamespace, Name: "premade", Labels: map[string]string{
			fleet.BundleNameLabel: "premade", fleet.BundleNamespaceLabel: fleet.DefaultWorkspace,
		}},
		Spec: fleet.BundleDeploymentSpec{DeploymentID: id, StagedDeploymentID: id,
			Options: fleet.BundleDeploymentOptions{DefaultNamespace: "premade", CreateNamespace: &no}},
	}
	g.Expect(up.Create(ctx, bd)).To(Succeed())
	t.Cleanup(func() { _ = client.IgnoreNotFound(up.Delete(context.Background(), bd)) })

	g.Eventually(func(g Gomega) {
		got := get(ctx, g, bd)
		c := conditions.Get(got, fleet.ConditionDeployed)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(fleet.ReasonNamespaceMissing))
		g.Expect(c.Message).To(And(ContainSubstring("namespace premade does not exist"), ContainSubstring("create the namespace")))
		g.Expect(summary.State(got)).To(Equal(fleet.ErrApplied))
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "Deployed=False NamespaceMissing")
	err := down.Get(ctx, client.ObjectKey{Name: "premade"}, &corev1.Namespace{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the agent created no namespace: %v", err)

	g.Expect(down.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "premade"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(ctx, g, bd)
		g.Expect(conditions.IsTrue(got, fleet.ConditionReady)).To(BeTrue(), "Ready: %+v", conditions.Get(got, fleet.ConditionReady))
		g.Expect(got.Status.AppliedDeploymentID).To(Equal(id))
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "deployed once the namespace exists")
	g.Expect(down.Get(ctx, client.ObjectKey{Namespace: "premade", Name: "app-config"}, &corev1.ConfigMap{})).To(Succeed())
}

// namespaceSelectorWaitsForTheLabels: a GitRepoRestriction's
// allowedTargetNamespaceSelector, carried in the options, is checked by the
// agent against the namespace downstream: missing, then unlabelled, it
// blocks the deployment with Fleet's texts (NamespaceNotAllowed) and
// creates nothing; labelled, it deploys by itself.
func namespaceSelectorWaitsForTheLabels(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	id := newContent(ctx, t, map[string]string{"cm.yaml": appConfig})
	bd := &fleet.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: clusterNamespace, Name: "selected", Labels: map[string]string{
			fleet.BundleNameLabel: "selected", fleet.BundleNamespaceLabel: fleet.DefaultWorkspace,
		}},
		Spec: fleet.BundleDeploymentSpec{DeploymentID: id, StagedDeploymentID: id,
			Options: fleet.BundleDeploymentOptions{TargetNamespace: "selected", DefaultNamespace: "unselected-default",
				AllowedTargetNamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}},
	}
	g.Expect(up.Create(ctx, bd)).To(Succeed())
	t.Cleanup(func() { _ = client.IgnoreNotFound(up.Delete(context.Background(), bd)) })
	refused := func(message string) {
		g.Eventually(func(g Gomega) {
			got := get(ctx, g, bd)
			c := conditions.Get(got, fleet.ConditionDeployed)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(fleet.ReasonNamespaceNotAllowed))
			g.Expect(c.Message).To(HavePrefix(message))
		}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "Deployed=False NamespaceNotAllowed: %s", message)
		err := down.Get(ctx, client.ObjectKey{Namespace: "selected", Name: "app-config"}, &corev1.ConfigMap{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing deployed: %v", err)
	}

	refused("target namespace selected does not exist on downstream cluster")
	err := down.Get(ctx, client.ObjectKey{Name: "selected"}, &corev1.Namespace{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the agent created no namespace: %v", err)

	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "selected", Labels: map[string]string{"team": "b"}}}
	g.Expect(down.Create(ctx, ns)).To(Succeed())
	refused("target namespace selected does not match AllowedTargetNamespaceSelector team=a")

	ns.Labels["team"] = "a"
	g.Expect(down.Update(ctx, ns)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(ctx, g, bd)
		g.Expect(conditions.IsTrue(got, fleet.ConditionReady)).To(BeTrue(), "Ready: %+v", conditions.Get(got, fleet.ConditionReady))
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "deployed once the namespace carries the labels")
	g.Expect(down.Get(ctx, client.ObjectKey{Namespace: "selected", Name: "app-config"}, &corev1.ConfigMap{})).To(Succeed())
}

func deploysAManifestAndUninstallsItWhenDeleted(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	id := newContent(ctx, t, map[string]string{"cm.yaml": appConfig})
	bd := newBundleDeployment(ctx, t, "plain", id, "plain")

	g.Eventually(func(g Gomega) {
		got := get(ctx, g, bd)
		g.Expect(conditions.IsTrue(got, fleet.ConditionReady)).To(BeTrue(), "Ready: %+v", conditions.Get(got, fleet.ConditionReady))
		g.Expect(summary.State(got)).To(Equal(fleet.Ready))
		g.Expect(got.Status.AppliedDeploymentID).To(Equal(id))
		g.Expect(got.Status.Release).To(HavePrefix("plain/plain:"))
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "the BundleDeployment to become Ready")
	cm := &corev1.ConfigMap{}
	g.Expect(down.Get(ctx, client.ObjectKey{Namespace: "plain", Name: "app-config"}, cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("color", "blue"))
	g.Expect(cm.Labels).To(HaveKeyWithValue(fleet.ReleaseNameLabel, "plain"))

	g.Expect(up.Delete(ctx, bd)).To(Succeed())
	g.Eventually(func() bool {
		err := down.Get(ctx, client.ObjectKey{Namespace: "plain", Name: "app-config"}, &corev1.ConfigMap{})
		return apierrors.IsNotFound(err)
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(BeTrue(), "the ConfigMap to be uninstalled downstream")
	g.Eventually(func(g Gomega) {
		list := &corev1.SecretList{}
		g.Expect(down.List(ctx, list, client.InNamespace("plain"), client.MatchingLabels{"owner": "helm"})).To(Succeed())
		g.Expect(list.Items).To(BeEmpty())
	}).WithTimeout(30*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "the release records to be removed")
}

func aChartThatFailsToRenderStalls(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	id := newContent(ctx, t, map[string]string{
		"Chart.yaml":        "apiVersion: v2\nname: broken\nversion: 0.1.0\n",
		"templates/cm.yaml": `{{ fail "this chart is broken on purpose" }}`,
	})
	bd := newBundleDeployment(ctx, t, "broken", id, "broken")

	var stalled *fleet.BundleDeployment
	g.Eventually(func(g Gomega) {
		stalled = get(ctx, g, bd)
		for _, t := range []string{fleet.ConditionDeployed, fleet.ConditionReady} {
			c := conditions.Get(stalled, t)
			g.Expect(c).NotTo(BeNil(), "no %s condition yet", t)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(fleet.ReasonInstallFailed))
			g.Expect(c.Message).To(ContainSubstring("this chart is broken on purpose"))
		}
		g.Expect(summary.State(stalled)).To(Equal(fleet.ErrApplied))
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "the Deployed and Ready conditions to say the chart fails")

	// Not retried: no more reconciles and no more status writes.
	before, err := reconciles()
	g.Expect(err).NotTo(HaveOccurred())
	g.Consistently(func(g Gomega) {
		n, err := reconciles()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(before), "reconciles of the agent")
		g.Expect(get(ctx, g, bd).ResourceVersion).To(Equal(stalled.ResourceVersion))
	}).WithTimeout(4*time.Second).WithPolling(250*time.Millisecond).Should(Succeed(), "a stalled deployment to wait")

	// A new generation with a chart that renders is deployed.
	fixed := newContent(ctx, t, map[string]string{"cm.yaml": appConfig})
	g.Eventually(func() error {
		latest := &fleet.BundleDeployment{}
		if err := up.Get(ctx, client.ObjectKeyFromObject(bd), latest); err != nil {
			return err
		}
		latest.Spec.DeploymentID, latest.Spec.StagedDeploymentID = fixed, fixed
		return up.Update(ctx, latest)
	}).WithTimeout(10 * time.Second).Should(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(ctx, g, bd)
		g.Expect(conditions.IsTrue(got, fleet.ConditionReady)).To(BeTrue(), "Ready: %+v", conditions.Get(got, fleet.ConditionReady))
		g.Expect(conditions.Get(got, fleet.ConditionDeployed).Reason).To(Equal(fleet.ReasonDeployed))
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "the fixed BundleDeployment to become Ready")
}
