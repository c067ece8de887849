package bundledeployment_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/bundledeployment"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/summary"
)

// TestFleetBehaviours: where Fleet's e2e suite found the agent behaving
// differently from Fleet's (issue #34), each rule against the two control
// planes and the real agent.
func TestFleetBehaviours(t *testing.T) {
	runAgent(t)
	t.Run("a renamed release leaves no old release behind", aRenamedReleaseLeavesNoOldReleaseBehind)
	t.Run("a moved release leaves no old release behind", aMovedReleaseLeavesNoOldReleaseBehind)
	t.Run("a dependsOn naming no bundle of this cluster is ErrApplied in Fleet's words", aMissingDependencyIsErrApplied)
	t.Run("a deleted object is reported missing in Fleet's words", aDeletedObjectIsMissingInFleetsWords)
	t.Run("comparePatches hide drift without a deploy; a forced resync upgrades as Fleet's does", comparePatchesThenForcedResync)
}

// releasesOf lists the Helm release records of a release name downstream.
func releasesOf(ctx context.Context, g Gomega, namespace, name string) []corev1.Secret {
	list := &corev1.SecretList{}
	g.Expect(down.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels{"owner": "helm", "name": name})).To(Succeed())
	return list.Items
}

// changeOptions changes a BundleDeployment's options, as the manager does
// when fleet.yaml changes them.
func changeOptions(ctx context.Context, g Gomega, bd *fleet.BundleDeployment, change func(*fleet.BundleDeploymentOptions)) {
	got := get(ctx, g, bd)
	change(&got.Spec.Options)
	got.Spec.DeploymentID += "x"
	got.Spec.StagedDeploymentID = got.Spec.DeploymentID
	g.Expect(up.Update(ctx, got)).To(Succeed())
}

// Changing helm.releaseName installs the new release and uninstalls the old
// one: its records and its objects are gone, none is orphaned.
func aRenamedReleaseLeavesNoOldReleaseBehind(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	id := newContent(ctx, t, map[string]string{"cm.yaml": appConfig})
	bd := newBundleDeployment(ctx, t, "renamed", id, "renamed")
	waitReady(ctx, t, bd, id)
	g.Expect(releasesOf(ctx, g, "renamed", "renamed")).NotTo(BeEmpty())

	changeOptions(ctx, g, bd, func(o *fleet.BundleDeploymentOptions) {
		o.Helm = &fleet.HelmOptions{ReleaseName: "second-name"}
	})
	g.Eventually(func(g Gomega) {
		got := get(ctx, g, bd)
		g.Expect(conditions.IsTrue(got, fleet.ConditionReady)).To(BeTrue(), "Ready: %+v", conditions.Get(got, fleet.ConditionReady))
		g.Expect(got.Status.Release).To(HavePrefix("renamed/second-name:"))
		g.Expect(releasesOf(ctx, g, "renamed", "second-name")).NotTo(BeEmpty())
		g.Expect(releasesOf(ctx, g, "renamed", "renamed")).To(BeEmpty(), "the old release is uninstalled")
		cm := &corev1.ConfigMap{}
		g.Expect(down.Get(ctx, client.ObjectKey{Namespace: "renamed", Name: "app-config"}, cm)).To(Succeed())
		g.Expect(cm.Labels).To(HaveKeyWithValue(fleet.ReleaseNameLabel, "second-name"), "the object belongs to the new release")
	}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	removeAndWaitUninstalled(ctx, t, bd, "renamed")
}

// Changing the namespace a bundle deploys to installs the release there and
// uninstalls it, with its objects, from the old namespace.
func aMovedReleaseLeavesNoOldReleaseBehind(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	id := newContent(ctx, t, map[string]string{"cm.yaml": appConfig})
	bd := newBundleDeployment(ctx, t, "moved", id, "moved-from")
	waitReady(ctx, t, bd, id)

	changeOptions(ctx, g, bd, func(o *fleet.BundleDeploymentOptions) { o.DefaultNamespace = "moved-to" })
	g.Eventually(func(g Gomega) {
		got := get(ctx, g, bd)
		g.Expect(conditions.IsTrue(got, fleet.ConditionReady)).To(BeTrue(), "Ready: %+v", conditions.Get(got, fleet.ConditionReady))
		g.Expect(got.Status.Release).To(HavePrefix("moved-to/moved:"))
		g.Expect(down.Get(ctx, client.ObjectKey{Namespace: "moved-to", Name: "app-config"}, &corev1.ConfigMap{})).To(Succeed())
		g.Expect(releasesOf(ctx, g, "moved-from", "moved")).To(BeEmpty(), "the old release is uninstalled")
		g.Expect(exists(ctx, g, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "moved-from", Name: "app-config"}})).
			To(BeFalse(), "the old release's objects are gone")
	}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	removeAndWaitUninstalled(ctx, t, bd, "moved-to")
}

// A dependsOn naming a bundle that has no BundleDeployment on this cluster
// is ErrApplied with Fleet's message (Fleet's e2e suite compares it whole);
// once that bundle arrives, the dependent deploys.
func aMissingDependencyIsErrApplied(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	id := newContent(ctx, t, map[string]string{"cm.yaml": appConfig})
	bd := &fleet.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: clusterNamespace, Name: "dependent", Labels: map[string]string{
			fleet.BundleNameLabel: "dependent", fleet.BundleNamespaceLabel: fleet.DefaultWorkspace,
		}},
		Spec: fleet.BundleDeploymentSpec{DeploymentID: id, StagedDeploymentID: id,
			Options:   fleet.BundleDeploymentOptions{DefaultNamespace: "dependent"},
			DependsOn: []fleet.BundleRef{{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"role": "root"}}}}},
	}
	g.Expect(up.Create(ctx, bd)).To(Succeed())
	t.Cleanup(func() { _ = client.IgnoreNotFound(up.Delete(context.Background(), bd)) })
	want := "list bundledeployments: no bundles matching labels role=root in namespace " + fleet.DefaultWorkspace
	g.Eventually(func(g Gomega) {
		got := get(ctx, g, bd)
		g.Expect(summary.State(got)).To(Equal(fleet.ErrApplied))
		g.Expect(summary.Message(got)).To(Equal(want))
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "ErrApplied with Fleet's message")

	root := newBundleDeployment(ctx, t, "root", newContent(ctx, t, map[string]string{"other.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: other\n"}), "dependent")
	got := get(ctx, g, root)
	got.Labels["role"] = "root"
	g.Expect(up.Update(ctx, got)).To(Succeed())
	waitReady(ctx, t, bd, id)
	removeAndWaitUninstalled(ctx, t, bd, "dependent")
	removeAndWaitUninstalled(ctx, t, root, "dependent")
}

// An object of the release deleted downstream (no drift correction) makes
// the deployment Modified, with Fleet's "<kind>.<group> <ns>/<name> missing".
func aDeletedObjectIsMissingInFleetsWords(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	id := newContent(ctx, t, map[string]string{"cm.yaml": appConfig})
	bd := newBundleDeployment(ctx, t, "gone", id, "gone")
	waitReady(ctx, t, bd, id)
	g.Expect(down.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "gone", Name: "app-config"}})).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(ctx, g, bd)
		g.Expect(summary.State(got)).To(Equal(fleet.Modified))
		c := conditions.Get(got, fleet.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Message).To(Equal("configmap.v1 gone/app-config missing"))
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "Modified, the ConfigMap missing")
	removeAndWaitUninstalled(ctx, t, bd, "gone")
}

// MissingDependency names the first dependsOn entry nothing on the cluster
// satisfies, with the selector Fleet lists by (a name is its bundle-name and
// bundle-namespace labels).
func TestMissingDependency(t *testing.T) {
	g := NewWithT(t)
	labels := map[string]string{fleet.BundleNameLabel: "db", fleet.BundleNamespaceLabel: "fleet-default"}
	all := []fleet.BundleDeployment{{ObjectMeta: metav1.ObjectMeta{Name: "db", Labels: labels}}}
	app := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "app", Labels: map[string]string{
		fleet.BundleNameLabel: "app", fleet.BundleNamespaceLabel: "fleet-default"}}}

	app.Spec.DependsOn = []fleet.BundleRef{{Name: "db"}}
	g.Expect(bundledeployment.MissingDependency(app, all)).To(Succeed())

	app.Spec.DependsOn = []fleet.BundleRef{{Name: "db"}, {Name: "queue"}}
	err := bundledeployment.MissingDependency(app, all)
	g.Expect(err).To(MatchError("list bundledeployments: no bundles matching labels " +
		"fleet.cattle.io/bundle-name=queue,fleet.cattle.io/bundle-namespace=fleet-default in namespace fleet-default"))
	g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonWaitingForDeps))
}

// comparePatches only change what drift is: adding one for a drifted field
// deploys nothing (the deploymentID leaves diff options out, as Fleet's
// options.DeploymentID does), the field keeps its drifted value and the
// deployment is Ready again. A forced resync (forceSyncGeneration, which is
// in the deploymentID) upgrades the release, and Helm's three-way merge sets
// the field back to the chart's value: Fleet's agent runs the same Helm
// upgrade (helmdeployer install.go, action.NewUpgrade) and applies no
// comparePatches to what it sends.
func comparePatchesThenForcedResync(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	id := newContent(ctx, t, map[string]string{"cm.yaml": appConfig})
	bd := newBundleDeployment(ctx, t, "ignored", id, "ignored")
	waitReady(ctx, t, bd, id)
	key := client.ObjectKey{Namespace: "ignored", Name: "app-config"}
	cm := &corev1.ConfigMap{}
	g.Expect(down.Get(ctx, key, cm)).To(Succeed())
	cm.Data["color"] = "red"
	g.Expect(down.Update(ctx, cm)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(summary.State(get(ctx, g, bd))).To(Equal(fleet.Modified))
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "the drift is seen")
	release := get(ctx, g, bd).Status.Release

	// The manager writes new diff options under the same deploymentID.
	got := get(ctx, g, bd)
	got.Spec.Options.Diff = &fleet.DiffOptions{ComparePatches: []fleet.ComparePatch{{
		APIVersion: "v1", Kind: "ConfigMap", Namespace: "ignored", Name: "app-config",
		Operations: []fleet.Operation{{Op: "remove", Path: "/data/color"}},
	}}}
	g.Expect(up.Update(ctx, got)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := get(ctx, g, bd)
		g.Expect(summary.State(got)).To(Equal(fleet.Ready), "Ready: %+v", conditions.Get(got, fleet.ConditionReady))
		g.Expect(got.Status.Release).To(Equal(release), "no new revision")
	}).WithTimeout(60*time.Second).WithPolling(200*time.Millisecond).Should(Succeed(), "the ignored drift is no drift")
	g.Consistently(func(g Gomega) {
		g.Expect(down.Get(ctx, key, cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("color", "red"), "nothing deploys over the drifted field")
	}).WithTimeout(3 * time.Second).WithPolling(500 * time.Millisecond).Should(Succeed())

	// A forced resync: forceSyncGeneration changes the deploymentID.
	changeOptions(ctx, g, bd, func(o *fleet.BundleDeploymentOptions) { o.ForceSyncGeneration = 1 })
	g.Eventually(func(g Gomega) {
		got := get(ctx, g, bd)
		g.Expect(got.Status.AppliedDeploymentID).To(Equal(got.Spec.DeploymentID))
		g.Expect(got.Status.Release).NotTo(Equal(release), "the release is upgraded")
		g.Expect(summary.State(got)).To(Equal(fleet.Ready))
		g.Expect(down.Get(ctx, key, cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("color", "blue"), "Helm's three-way merge reverts the field, as in Fleet")
	}).WithTimeout(60 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	removeAndWaitUninstalled(ctx, t, bd, "ignored")
}
