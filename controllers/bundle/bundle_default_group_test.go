package bundle_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// TestTargetlessBundleNeedsADefaultClusterGroup: a GitRepo without targets
// gets Fleet's default target, clusterGroup "default" (issue #34). As in
// Fleet, that is a ClusterGroup like any other: Fleet's bootstrap makes one
// only in fleet-local (selecting name=local), and no workspace gets one by
// itself. So in a new workspace a Cluster made there by hand gets nothing
// until a ClusterGroup named default selects it; then it gets its
// BundleDeployment.
func TestTargetlessBundleNeedsADefaultClusterGroup(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ws, err := env.CreateNamespace(ctx, "workspace")
	g.Expect(err).NotTo(HaveOccurred())
	clusterNS := newCluster(ctx, g, ws.Name, "by-hand")

	b := &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "targetless", Namespace: ws.Name},
		Spec: fleet.BundleSpec{
			Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n"}},
			// What the GitRepo controller writes for a GitRepo without
			// targets (bundlereader's default target).
			Targets: []fleet.BundleTarget{{Name: fleet.DefaultTargetName, ClusterGroup: fleet.DefaultClusterGroup}},
		},
	}
	g.Expect(env.Create(ctx, b)).To(Succeed())
	t.Cleanup(func() { _ = client.IgnoreNotFound(env.Delete(context.Background(), b)) })
	key := client.ObjectKey{Namespace: clusterNS, Name: b.Name}

	g.Eventually(func(g Gomega) {
		got := &fleet.Bundle{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed())
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
	}).WithTimeout(timeout).Should(Succeed(), "the bundle reconciled")
	g.Consistently(func() bool {
		return apierrors.IsNotFound(env.Get(ctx, key, &fleet.BundleDeployment{}))
	}).WithTimeout(3*time.Second).Should(BeTrue(), "no default ClusterGroup in the workspace: no BundleDeployment")

	group := &fleet.ClusterGroup{
		ObjectMeta: metav1.ObjectMeta{Name: fleet.DefaultClusterGroup, Namespace: ws.Name},
		Spec:       fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "test"}}},
	}
	g.Expect(env.Create(ctx, group)).To(Succeed())
	g.Eventually(func() error {
		return env.Get(ctx, key, &fleet.BundleDeployment{})
	}).WithTimeout(timeout).Should(Succeed(), "the default ClusterGroup selects the cluster: its BundleDeployment")
}
