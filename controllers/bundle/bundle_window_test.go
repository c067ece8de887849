package bundle_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// A cluster outside its deployment window keeps the BundleDeployment of a
// bundle that no longer targets it (removing it would uninstall, a change
// the window holds); it goes once the window opens.
func TestWindowHoldsTheRemovalOfAnUntargetedDeployment(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "window")
	g.Expect(err).NotTo(HaveOccurred())
	clusterNS := newCluster(ctx, g, ns.Name, "held")
	cluster := &fleet.Cluster{}
	g.Expect(env.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "held"}, cluster)).To(Succeed())
	setWindow := func(scheduled, active bool) {
		g.Eventually(func() error {
			c := &fleet.Cluster{}
			if err := env.Get(ctx, client.ObjectKeyFromObject(cluster), c); err != nil {
				return err
			}
			c.Status.Scheduled, c.Status.ActiveSchedule = scheduled, active
			return env.Status().Update(ctx, c)
		}).WithTimeout(timeout).Should(Succeed())
	}
	setWindow(true, false)

	b := appBundle(ns.Name)
	g.Expect(env.Create(ctx, b)).To(Succeed())
	key := client.ObjectKey{Namespace: clusterNS, Name: "app"}
	g.Eventually(func(g Gomega) {
		bd := &fleet.BundleDeployment{}
		g.Expect(env.Get(ctx, key, bd)).To(Succeed())
		g.Expect(bd.Spec.OffSchedule).To(BeTrue())
	}).WithTimeout(timeout).Should(Succeed(), "the held cluster's BundleDeployment, offSchedule")

	// The cluster leaves the bundle's targets while its window is closed.
	c := &fleet.Cluster{}
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(cluster), c)).To(Succeed())
	before := c.DeepCopy()
	c.Labels["env"] = "other"
	g.Expect(env.Patch(ctx, c, client.MergeFrom(before))).To(Succeed())
	g.Consistently(func() error {
		return env.Get(ctx, key, &fleet.BundleDeployment{})
	}).WithTimeout(3*time.Second).Should(Succeed(), "kept while the window is closed")

	setWindow(true, true)
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Get(ctx, key, &fleet.BundleDeployment{}))
	}).WithTimeout(timeout).Should(BeTrue(), "removed once the window opens")
}
