package clustergroup_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/clustergroup"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/test/envtest"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	os.Exit(envtest.Run(context.Background(), envtest.RunInput{
		M:    m,
		Name: "clustergroup",
		SetupReconcilers: func(_ context.Context, mgr ctrl.Manager) error {
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
	for name, env_ := range map[string]string{"a": "prod", "b": "prod", "c": "dev"} {
		c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name, Labels: map[string]string{"env": env_}}}
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
	c.Labels["env"] = "prod"
	g.Expect(env.Update(ctx, c)).To(Succeed())
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
