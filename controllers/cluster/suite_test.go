package cluster_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/cluster"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/test/envtest"
)

var env *envtest.Environment

func TestMain(m *testing.M) {
	os.Exit(envtest.Run(context.Background(), envtest.RunInput{
		M:          m,
		Name:       "cluster",
		Namespaces: []string{agentNS},
		SetupReconcilers: func(_ context.Context, mgr ctrl.Manager) error {
			// What is written, not when (TestSummaryWritesCoalesced): a
			// rollout starting is held SummaryInterval here, not a minute.
			return (&cluster.Reconciler{Client: mgr.GetClient(), Workers: 2, AgentNamespace: agentNS,
				SummaryHold: time.Second}).SetupWithManager(mgr)
		},
		SetupEnv: func(e *envtest.Environment) { env = e },
	}))
}

const timeout = 20 * time.Second

// agentNS holds the agents' ServiceAccounts.
const agentNS = "fleet-agents-system"

// ready waits for the cluster's Ready condition to have status and reason.
func ready(ctx context.Context, g *WithT, c *fleet.Cluster, status metav1.ConditionStatus, reason string) {
	g.Eventually(func(g Gomega) {
		got := &fleet.Cluster{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
		r := conditions.Get(got, fleet.ConditionReady)
		g.Expect(r).NotTo(BeNil())
		g.Expect(r.Status).To(Equal(status))
		g.Expect(r.Reason).To(Equal(reason))
		g.Expect(conditions.IsTrue(got, fleet.ConditionProcessed)).To(BeTrue())
	}).WithTimeout(timeout).Should(Succeed(), "Ready=%s %s", status, reason)
}

func TestClusterNamespaceAndReadiness(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "workspace")
	g.Expect(err).NotTo(HaveOccurred())
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns.Name}}
	g.Expect(env.CreateAndWait(ctx, c)).To(Succeed())

	clusterNS := names.ClusterNamespace(ns.Name, c.Name)
	g.Eventually(func(g Gomega) {
		n := &corev1.Namespace{}
		g.Expect(env.Get(ctx, client.ObjectKey{Name: clusterNS}, n)).To(Succeed())
		g.Expect(n.Labels).To(HaveKeyWithValue(fleet.ClusterLabel, c.Name))
	}).WithTimeout(timeout).Should(Succeed(), "the cluster namespace")
	ready(ctx, g, c, metav1.ConditionFalse, fleet.ClusterStateWaitCheckIn)

	// The agent checking in.
	checkedIn := c.DeepCopy()
	checkedIn.Status.Agent.LastSeen = metav1.Now()
	g.Expect(env.Status().Patch(ctx, checkedIn, client.MergeFrom(c))).To(Succeed())
	ready(ctx, g, c, metav1.ConditionTrue, fleet.ReasonReady)

	// A deployment not applied yet.
	bd := &fleet.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: clusterNS, Labels: map[string]string{
			fleet.ClusterLabel: c.Name, fleet.ClusterNamespaceLabel: c.Namespace,
			fleet.BundleNameLabel: "app", fleet.BundleNamespaceLabel: c.Namespace,
		}},
		Spec: fleet.BundleDeploymentSpec{DeploymentID: "s-abc:1", StagedDeploymentID: "s-abc:1"},
	}
	g.Expect(env.Create(ctx, bd)).To(Succeed())
	ready(ctx, g, c, metav1.ConditionFalse, string(fleet.WaitApplied))

	// The deployment ready.
	applied := bd.DeepCopy()
	applied.Status = fleet.BundleDeploymentStatus{AppliedDeploymentID: "s-abc:1", Ready: true, NonModified: true}
	g.Expect(env.Status().Patch(ctx, applied, client.MergeFrom(bd))).To(Succeed())
	ready(ctx, g, c, metav1.ConditionTrue, fleet.ReasonReady)
	got := &fleet.Cluster{}
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
	g.Expect(got.Status.Display.ReadyBundles).To(Equal("1/1"))
	g.Expect(got.Status.Namespace).To(Equal(clusterNS))
}

// TestGitReposAndResourceCounts: a Cluster's readyGitRepos,
// desiredReadyGitRepos and resourceCounts come from its BundleDeployments,
// and are written again when they change, down to zero.
func TestGitReposAndResourceCounts(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "workspace")
	g.Expect(err).NotTo(HaveOccurred())
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns.Name}}
	g.Expect(env.CreateAndWait(ctx, c)).To(Succeed())
	clusterNS := names.ClusterNamespace(ns.Name, c.Name)
	status := func() fleet.ClusterStatus {
		got := &fleet.Cluster{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
		return got.Status
	}
	g.Eventually(status).WithTimeout(timeout).Should(HaveField("Namespace", clusterNS), "the cluster namespace in status")

	deploy := func(bundle, repo string, st fleet.BundleDeploymentStatus) *fleet.BundleDeployment {
		label := fleet.RepoLabel
		if strings.HasPrefix(bundle, "helm-") {
			label = fleet.HelmOpLabel
		}
		bd := &fleet.BundleDeployment{
			ObjectMeta: metav1.ObjectMeta{Name: bundle, Namespace: clusterNS, Labels: map[string]string{
				fleet.ClusterLabel: c.Name, fleet.ClusterNamespaceLabel: c.Namespace,
				fleet.BundleNameLabel: bundle, fleet.BundleNamespaceLabel: c.Namespace, label: repo,
			}},
			Spec: fleet.BundleDeploymentSpec{DeploymentID: "s-abc:1", StagedDeploymentID: "s-abc:1"},
		}
		g.Expect(env.CreateAndWait(ctx, bd)).To(Succeed())
		withStatus := bd.DeepCopy()
		withStatus.Status = st
		g.Expect(env.Status().Patch(ctx, withStatus, client.MergeFrom(bd))).To(Succeed())
		return withStatus
	}
	deploy("a-one", "a", fleet.BundleDeploymentStatus{AppliedDeploymentID: "s-abc:1", Ready: true, NonModified: true,
		ResourceCounts: fleet.ResourceCounts{DesiredReady: 2, Ready: 2}})
	notReady := deploy("b-one", "b", fleet.BundleDeploymentStatus{AppliedDeploymentID: "s-abc:1", NonModified: true,
		ResourceCounts: fleet.ResourceCounts{DesiredReady: 3, Ready: 1, NotReady: 1, Missing: 1}})
	deploy("helm-one", "chart", fleet.BundleDeploymentStatus{AppliedDeploymentID: "s-abc:1", Ready: true, NonModified: true})
	deploy("helm-two", "other-chart", fleet.BundleDeploymentStatus{AppliedDeploymentID: "s-abc:1", NonModified: true})
	g.Eventually(status).WithTimeout(timeout).Should(And(
		HaveField("ReadyGitRepos", 1),
		HaveField("DesiredReadyGitRepos", 2),
		HaveField("ReadyHelmOps", 1),
		HaveField("DesiredReadyHelmOps", 2),
		HaveField("ResourceCounts", fleet.ResourceCounts{DesiredReady: 5, Ready: 3, NotReady: 1, Missing: 1}),
	), "one of two GitRepos and one of two HelmOps ready, resources summed")

	fixed := notReady.DeepCopy()
	fixed.Status.Ready, fixed.Status.ResourceCounts = true, fleet.ResourceCounts{DesiredReady: 3, Ready: 3}
	g.Expect(env.Status().Patch(ctx, fixed, client.MergeFrom(notReady))).To(Succeed())
	g.Eventually(status).WithTimeout(timeout).Should(And(
		HaveField("ReadyGitRepos", 2),
		HaveField("ResourceCounts", fleet.ResourceCounts{DesiredReady: 5, Ready: 5}),
	), "both GitRepos ready")

	g.Expect(env.DeleteAllOf(ctx, &fleet.BundleDeployment{}, client.InNamespace(clusterNS))).To(Succeed())
	g.Eventually(status).WithTimeout(timeout).Should(And(
		HaveField("ReadyGitRepos", 0),
		HaveField("DesiredReadyGitRepos", 0),
		HaveField("ReadyHelmOps", 0),
		HaveField("DesiredReadyHelmOps", 0),
		HaveField("ResourceCounts", fleet.ResourceCounts{}),
	), "back to zero with the deployments gone")
}
