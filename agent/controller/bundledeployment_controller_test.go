package controller_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
