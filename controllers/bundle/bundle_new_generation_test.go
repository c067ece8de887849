package bundle_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
)

// A Bundle's status stamped with a new generation never counts the
// previous deployment as ready: readers (Notifications) take that status
// as "for this spec". Watched, not polled, so a status that lived for one
// update is seen.
func TestNewGenerationNeverShowsPreviousReady(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns, err := env.CreateNamespace(ctx, "bundle-gen")
	g.Expect(err).NotTo(HaveOccurred())
	clusterNS := newCluster(ctx, g, ns.Name, "one")

	b := appBundle(ns.Name)
	g.Expect(env.Create(ctx, b)).To(Succeed())

	// The agent's part: the deployment applied and ready.
	bd := &fleet.BundleDeployment{}
	g.Eventually(func(g Gomega) {
		g.Expect(env.Get(ctx, client.ObjectKey{Namespace: clusterNS, Name: "app"}, bd)).To(Succeed())
		g.Expect(bd.Spec.DeploymentID).NotTo(BeEmpty())
		bd.Status.AppliedDeploymentID = bd.Spec.DeploymentID
		bd.Status.Ready, bd.Status.NonModified = true, true
		g.Expect(env.Status().Update(ctx, bd)).To(Succeed())
	}).WithTimeout(timeout).Should(Succeed(), "the BundleDeployment marked applied and ready")
	g.Eventually(func(g Gomega) {
		got := &fleet.Bundle{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed())
		g.Expect(got.Status.Summary.Ready).To(Equal(1))
	}).WithTimeout(timeout).Should(Succeed(), "the bundle ready on its one cluster")

	wc, err := client.NewWithWatch(env.Config, client.Options{Scheme: controllers.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(ctx, &fleet.BundleList{}, client.InNamespace(ns.Name))
	g.Expect(err).NotTo(HaveOccurred())
	defer w.Stop()

	var generation int64
	g.Eventually(func(g Gomega) {
		got := &fleet.Bundle{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed())
		got.Spec.Resources[0].Content += "data: {version: v2}\n"
		g.Expect(env.Update(ctx, got)).To(Succeed())
		generation = got.Generation
	}).WithTimeout(timeout).Should(Succeed(), "the bundle's spec changed")

	// Every status of the new generation, until one counts the deployment
	// waiting for its agent; none may count it ready.
	deadline := time.After(timeout)
	for {
		select {
		case ev, ok := <-w.ResultChan():
			g.Expect(ok).To(BeTrue(), "the watch ended")
			got, isBundle := ev.Object.(*fleet.Bundle)
			g.Expect(isBundle).To(BeTrue(), "a watch event of %T", ev.Object)
			if got.Status.ObservedGeneration != generation {
				continue
			}
			g.Expect(got.Status.Summary.Ready).To(Equal(0),
				"generation %d's status counts the previous deployment ready: %+v", generation, got.Status.Summary)
			if got.Status.Summary.WaitApplied == 1 {
				return
			}
		case <-deadline:
			t.Fatalf("no status of generation %d counting the deployment waiting for its agent in %s", generation, timeout)
		}
	}
}
