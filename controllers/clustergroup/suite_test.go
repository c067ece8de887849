package clustergroup_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/cluster"
	"github.com/gitfleet/fleet/controllers/clustergroup"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/test/envtest"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	os.Exit(envtest.Run(context.Background(), envtest.RunInput{
		M:    m,
		Name: "clustergroup",
		// The cluster reconciler runs too: a group sums what it writes
		// into its Clusters from their BundleDeployments.
		SetupReconcilers: func(_ context.Context, mgr ctrl.Manager) error {
			if err := (&cluster.Reconciler{Client: mgr.GetClient(), Workers: 2}).SetupWithManager(mgr); err != nil {
				return err
			}
			return (&clustergroup.Reconciler{Client: mgr.GetClient(), Workers: 2}).SetupWithManager(mgr)
		},
		SetupEnv: func(e *envtest.Environment) { env = e },
	}))
}

const timeout = 20 * time.Second

func TestSelectorCountsMatchingClusters(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "groups")
	g.Expect(err).NotTo(HaveOccurred())
	for name, envLabel := range map[string]string{"a": "prod", "b": "prod", "c": "dev"} {
		c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name, Labels: map[string]string{"env": envLabel}}}
		g.Expect(env.CreateAndWait(ctx, c)).To(Succeed())
	}
	group := &fleet.ClusterGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "prod", Namespace: ns.Name},
		Spec:       fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}},
	}
	g.Expect(env.Create(ctx, group)).To(Succeed())
	count := func(want int) {
		g.Eventually(func(g Gomega) {
			got := &fleet.ClusterGroup{}
			g.Expect(env.Get(ctx, client.ObjectKeyFromObject(group), got)).To(Succeed())
			g.Expect(got.Status.ClusterCount).To(Equal(want))
			// The clusters have no agent: none of them is Ready.
			g.Expect(got.Status.NonReadyClusterCount).To(Equal(want))
			g.Expect(conditions.Get(got, fleet.ConditionReady)).NotTo(BeNil())
		}).WithTimeout(timeout).Should(Succeed(), "the group counts %d clusters", want)
	}
	count(2)

	// A cluster relabelled into the group is counted.
	c := &fleet.Cluster{}
	g.Expect(env.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "c"}, c)).To(Succeed())
	// A patch, as kubectl label does: the cluster controller writes the
	// same object, so an Update from a stale copy may conflict.
	before := c.DeepCopy()
	c.Labels["env"] = "prod"
	g.Expect(env.Patch(ctx, c, client.MergeFrom(before))).To(Succeed())
	count(3)
}

func TestInvalidSelectorStalls(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "invalid")
	g.Expect(err).NotTo(HaveOccurred())
	group := &fleet.ClusterGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "broken", Namespace: ns.Name},
		Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Near"}}}},
	}
	g.Expect(env.Create(ctx, group)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &fleet.ClusterGroup{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(group), got)).To(Succeed())
		c := conditions.Get(got, fleet.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(fleet.ReasonInvalidSelector))
		g.Expect(c.Message).To(ContainSubstring("spec.selector"))
	}).WithTimeout(timeout).Should(Succeed(), "Ready=False InvalidSelector")
}

// TestResourceCountsFromDeployments: a group's resourceCounts sum those its
// member Clusters get from their BundleDeployments; a cluster outside the
// group does not count.
func TestResourceCountsFromDeployments(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "counts")
	g.Expect(err).NotTo(HaveOccurred())
	deployed := map[string]fleet.ResourceCounts{
		"a": {DesiredReady: 2, Ready: 2},
		"b": {DesiredReady: 3, Ready: 1, Modified: 1, Missing: 1},
		"c": {DesiredReady: 7, Ready: 7},
	}
	for name, counts := range deployed {
		envLabel := "prod"
		if name == "c" {
			envLabel = "dev"
		}
		c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name, Labels: map[string]string{"env": envLabel}}}
		g.Expect(env.CreateAndWait(ctx, c)).To(Succeed())
		clusterNS := names.ClusterNamespace(ns.Name, name)
		g.Eventually(func() error { return env.Get(ctx, client.ObjectKey{Name: clusterNS}, &corev1.Namespace{}) }).
			WithTimeout(timeout).Should(Succeed(), "the namespace of cluster %s", name)
		bd := &fleet.BundleDeployment{
			ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: clusterNS, Labels: map[string]string{
				fleet.ClusterLabel: name, fleet.ClusterNamespaceLabel: ns.Name, fleet.BundleNameLabel: "app", fleet.BundleNamespaceLabel: ns.Name,
			}},
			Spec: fleet.BundleDeploymentSpec{DeploymentID: "s-1:a", StagedDeploymentID: "s-1:a"},
		}
		g.Expect(env.CreateAndWait(ctx, bd)).To(Succeed())
		withStatus := bd.DeepCopy()
		withStatus.Status = fleet.BundleDeploymentStatus{AppliedDeploymentID: "s-1:a", Ready: true, NonModified: true, ResourceCounts: counts}
		g.Expect(env.Status().Patch(ctx, withStatus, client.MergeFrom(bd))).To(Succeed())
	}
	group := &fleet.ClusterGroup{
		ObjectMeta: metav1.ObjectMeta{Name: "prod", Namespace: ns.Name},
		Spec:       fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}},
	}
	g.Expect(env.Create(ctx, group)).To(Succeed())
	g.Eventually(func() fleet.ResourceCounts {
		got := &fleet.ClusterGroup{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(group), got)).To(Succeed())
		return got.Status.ResourceCounts
	}).WithTimeout(timeout).Should(Equal(fleet.ResourceCounts{DesiredReady: 5, Ready: 3, Modified: 1, Missing: 1}),
		"the counts of clusters a and b")
}
