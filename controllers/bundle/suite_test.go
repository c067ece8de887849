package bundle_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/bundle"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/secretmeta"
	"github.com/gitfleet/fleet/test/envtest"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	os.Exit(envtest.Run(context.Background(), envtest.RunInput{
		M:    m,
		Name: "bundle",
		// Only the bundle controller runs: the tests make the cluster
		// namespaces the cluster controller would.
		SetupReconcilers: func(ctx context.Context, mgr ctrl.Manager) error {
			secrets, err := secretmeta.ForManager(mgr)
			if err != nil {
				return err
			}
			return (&bundle.Reconciler{Client: mgr.GetClient(), Workers: 2, Secrets: secrets}).SetupWithManager(ctx, mgr)
		},
		SetupEnv: func(e *envtest.Environment) { env = e },
	}))
}

const timeout = 20 * time.Second

// newCluster creates a Cluster labelled env=test in ns and its cluster
// namespace, and returns that namespace.
func newCluster(ctx context.Context, g Gomega, ns, name string) string {
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"env": "test"}}}
	g.Expect(env.CreateAndWait(ctx, c)).To(Succeed())
	clusterNS := names.ClusterNamespace(ns, name)
	g.Expect(env.CreateAndWait(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterNS}})).To(Succeed())
	return clusterNS
}

// appBundle is a Bundle "app" in ns with one ConfigMap, targeting the
// clusters newCluster makes (env=test).
func appBundle(ns string) *fleet.Bundle {
	return &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: fleet.BundleSpec{
			Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n"}},
			Targets:   []fleet.BundleTarget{{Name: "test", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "test"}}}},
		},
	}
}

func TestBundleTargetsClustersAndCleansUp(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "bundle")
	g.Expect(err).NotTo(HaveOccurred())
	targeted := []string{newCluster(ctx, g, ns.Name, "one"), newCluster(ctx, g, ns.Name, "two")}

	b := appBundle(ns.Name)
	g.Expect(env.Create(ctx, b)).To(Succeed())

	for _, clusterNS := range targeted {
		g.Eventually(func(g Gomega) {
			bd := &fleet.BundleDeployment{}
			g.Expect(env.Get(ctx, client.ObjectKey{Namespace: clusterNS, Name: "app"}, bd)).To(Succeed())
			g.Expect(bd.Labels).To(HaveKeyWithValue(fleet.BundleNameLabel, "app"))
			g.Expect(bd.Spec.DeploymentID).To(HavePrefix(bd.Labels[fleet.ContentNameLabel] + ":"))
			g.Expect(env.Get(ctx, client.ObjectKey{Name: bd.Labels[fleet.ContentNameLabel]}, &fleet.Content{})).To(Succeed())
		}).WithTimeout(timeout).Should(Succeed(), "a BundleDeployment in cluster namespace %s, and its Content", clusterNS)
	}
	g.Eventually(func(g Gomega) {
		got := &fleet.Bundle{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed())
		g.Expect(got.Status.Summary.DesiredReady).To(Equal(2))
		g.Expect(got.Status.ObservedGeneration).To(Equal(got.Generation))
		g.Expect(conditions.Get(got, fleet.ConditionReady)).NotTo(BeNil())
	}).WithTimeout(timeout).Should(Succeed(), "the bundle's status counts two deployments")

	g.Expect(env.Delete(ctx, b)).To(Succeed())
	for _, clusterNS := range targeted {
		g.Eventually(func() bool {
			return apierrors.IsNotFound(env.Get(ctx, client.ObjectKey{Namespace: clusterNS, Name: "app"}, &fleet.BundleDeployment{}))
		}).WithTimeout(timeout).Should(BeTrue(), "the BundleDeployment in %s deleted with its bundle", clusterNS)
	}
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Get(ctx, client.ObjectKeyFromObject(b), &fleet.Bundle{}))
	}).WithTimeout(timeout).Should(BeTrue(), "the bundle gone once its finalizer ran")
}

func TestInvalidTargetsStall(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "bad")
	g.Expect(err).NotTo(HaveOccurred())
	b := &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: ns.Name},
		Spec: fleet.BundleSpec{Targets: []fleet.BundleTarget{{Name: "broken", ClusterSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Near"}}}}}},
	}
	g.Expect(env.Create(ctx, b)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &fleet.Bundle{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed())
		c := conditions.Get(got, fleet.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Reason).To(Equal(fleet.ReasonInvalidTargets))
		g.Expect(c.Message).To(ContainSubstring(`target "broken"`))
	}).WithTimeout(timeout).Should(Succeed(), "Ready=False InvalidTargets")
}
