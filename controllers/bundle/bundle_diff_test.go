package bundle_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// diff.comparePatches and correctDrift are left out of the deploymentID: a
// change of them alone reaches the BundleDeployments that run the
// deploymentID already (the agent needs them to stop reporting a drift),
// without a new deploymentID.
func TestDiffOnlyChangeReachesUpToDateDeployments(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "diffonly")
	g.Expect(err).NotTo(HaveOccurred())
	clusterNS := newCluster(ctx, g, ns.Name, "one")
	b := appBundle(ns.Name)
	g.Expect(env.Create(ctx, b)).To(Succeed())
	bd := &fleet.BundleDeployment{}
	g.Eventually(func() error {
		return env.Get(ctx, client.ObjectKey{Namespace: clusterNS, Name: "app"}, bd)
	}).WithTimeout(timeout).Should(Succeed())
	id := bd.Spec.DeploymentID

	got := &fleet.Bundle{}
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed())
	patch := client.MergeFrom(got.DeepCopy())
	got.Spec.Diff = &fleet.DiffOptions{ComparePatches: []fleet.ComparePatch{
		{APIVersion: "v1", Kind: "ConfigMap", Name: "app", JSONPointers: []string{"/data/tier"}}}}
	g.Expect(env.Patch(ctx, got, patch)).To(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(env.Get(ctx, client.ObjectKey{Namespace: clusterNS, Name: "app"}, bd)).To(Succeed())
		g.Expect(bd.Spec.Options.Diff).NotTo(BeNil())
		g.Expect(bd.Spec.Options.Diff.ComparePatches).To(HaveLen(1))
		g.Expect(bd.Spec.StagedOptions.Diff).To(Equal(bd.Spec.Options.Diff))
	}).WithTimeout(timeout).Should(Succeed(), "the comparePatches on the BundleDeployment")
	g.Expect(bd.Spec.DeploymentID).To(Equal(id), "no new deploymentID")
}
