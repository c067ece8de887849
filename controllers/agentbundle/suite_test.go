package agentbundle_test

import (
	"context"
	"os"
	"sort"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/agentbundle"
	"github.com/gitfleet/fleet/controllers/bundle"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/test/envtest"
)

var env *envtest.Environment

const (
	image   = "ghcr.io/gitfleet/fleet-agent:v2"
	timeout = 20 * time.Second
)

func TestMain(m *testing.M) {
	budget := intstr.FromString("20%")
	os.Exit(envtest.Run(context.Background(), envtest.RunInput{
		M:    m,
		Name: "agentbundle",
		// The bundle controller turns agent Bundles into BundleDeployments;
		// the tests play the agent, reporting those Ready.
		SetupReconcilers: func(ctx context.Context, mgr ctrl.Manager) error {
			if err := (&bundle.Reconciler{Client: mgr.GetClient(), Workers: 2}).SetupWithManager(ctx, mgr); err != nil {
				return err
			}
			return (&agentbundle.Reconciler{Client: mgr.GetClient(), Image: image, MaxUnavailable: &budget, Workers: 2}).SetupWithManager(mgr)
		},
		SetupEnv: func(e *envtest.Environment) { env = e },
	}))
}

// newCluster creates a Cluster and its cluster namespace; registered, its
// agent has checked in.
func newCluster(ctx context.Context, g Gomega, ns, name string, registered bool) *fleet.Cluster {
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}}
	g.Expect(env.Create(ctx, c)).To(Succeed())
	clusterNS := names.ClusterNamespace(ns, name)
	g.Expect(env.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterNS}})).To(Succeed())
	c.Status.Namespace = clusterNS
	if registered {
		c.Status.Agent.LastSeen = metav1.Now()
		c.Status.Agent.Namespace = "edge-agent"
	}
	g.Expect(env.Status().Update(ctx, c)).To(Succeed())
	return c
}

// agentBundles lists the agent Bundles of ns by name.
func agentBundles(ctx context.Context, g Gomega, ns string) map[string]*fleet.Bundle {
	list := &fleet.BundleList{}
	g.Expect(env.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{fleet.AgentBundleLabel: "true"})).To(Succeed())
	out := map[string]*fleet.Bundle{}
	for i := range list.Items {
		out[list.Items[i].Name] = &list.Items[i]
	}
	return out
}

// reportReady plays the agent: the BundleDeployment of an agent Bundle is
// applied and Ready at its deploymentID.
func reportReady(ctx context.Context, g Gomega, c *fleet.Cluster, b *fleet.Bundle) {
	bd := &fleet.BundleDeployment{}
	g.Expect(env.Get(ctx, client.ObjectKey{Namespace: c.Status.Namespace, Name: b.Name}, bd)).To(Succeed())
	g.Expect(bd.Labels[fleet.AgentBundleHashLabel]).To(Equal(b.Labels[fleet.AgentBundleHashLabel]), "the BundleDeployment is at the Bundle's version")
	bd.Status.AppliedDeploymentID, bd.Status.Ready, bd.Status.NonModified = bd.Spec.DeploymentID, true, true
	g.Expect(env.Status().Update(ctx, bd)).To(Succeed())
}

func TestAgentBundlesRollOutInBatches(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "agents")
	g.Expect(err).NotTo(HaveOccurred())
	clusterNames := []string{"a", "b", "c", "d", "e"}
	clusters := make([]*fleet.Cluster, 0, len(clusterNames))
	for _, name := range clusterNames {
		clusters = append(clusters, newCluster(ctx, g, ns.Name, name, true))
	}
	newCluster(ctx, g, ns.Name, "silent", false)

	// 20% of five: one cluster at a time. Each gets its agent Bundle only
	// once the one before is Ready.
	for done := 1; done <= len(clusters); done++ {
		g.Eventually(func(g Gomega) {
			g.Expect(agentBundles(ctx, g, ns.Name)).To(HaveLen(done))
		}).WithTimeout(timeout).Should(Succeed(), "%d agent Bundles", done)
		g.Consistently(func(g Gomega) {
			g.Expect(agentBundles(ctx, g, ns.Name)).To(HaveLen(done), "no further cluster before this one is Ready")
		}).WithTimeout(time.Second).Should(Succeed())
		g.Eventually(func(g Gomega) {
			bundles := agentBundles(ctx, g, ns.Name)
			names := make([]string, 0, len(bundles))
			for n := range bundles {
				names = append(names, n)
			}
			sort.Strings(names)
			last := names[done-1]
			reportReady(ctx, g, clusters[done-1], bundles[last])
		}).WithTimeout(timeout).Should(Succeed(), "the agent of cluster %d reports its Bundle Ready", done)
	}
	g.Expect(agentBundles(ctx, g, ns.Name)).NotTo(HaveKey("fleet-agent-silent"), "a cluster whose agent never checked in gets none")

	// A settings change is written at once, with the cluster's image.
	c := clusters[2]
	before := agentBundles(ctx, g, ns.Name)["fleet-agent-c"]
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
	c.Spec.AgentEnvVars = []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy:3128"}}
	g.Expect(env.Update(ctx, c)).To(Succeed())
	g.Eventually(func(g Gomega) {
		b := agentBundles(ctx, g, ns.Name)["fleet-agent-c"]
		g.Expect(b.Labels[fleet.AgentBundleHashLabel]).NotTo(Equal(before.Labels[fleet.AgentBundleHashLabel]))
		g.Expect(b.Spec.Resources[0].Content).To(ContainSubstring("http://proxy:3128"))
		g.Expect(b.Spec.Resources[0].Content).To(ContainSubstring("namespace: edge-agent"), "where the agent runs")
		g.Expect(b.Spec.Resources[0].Content).NotTo(ContainSubstring("kind: Secret"))
		g.Expect(b.Annotations[fleet.AgentImageAnnotation]).To(Equal(image))
	}).WithTimeout(timeout).Should(Succeed(), "the settings reach the agent Bundle")

	// A deleted Cluster's agent Bundle goes (the agent keeps its
	// Deployment: keepResources).
	g.Expect(env.Delete(ctx, clusters[0])).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(env.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "fleet-agent-a"}, &fleet.Bundle{}))
	}).WithTimeout(timeout).Should(BeTrue(), "the agent Bundle of a deleted Cluster is deleted")
}

func TestForeignBundleOfTheSameNameIsLeftAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "foreign")
	g.Expect(err).NotTo(HaveOccurred())
	foreign := &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "fleet-agent-x"},
		Spec:       fleet.BundleSpec{Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: mine\n"}}},
	}
	g.Expect(env.Create(ctx, foreign)).To(Succeed())
	newCluster(ctx, g, ns.Name, "x", true)
	newCluster(ctx, g, ns.Name, "y", true)
	g.Eventually(func(g Gomega) {
		g.Expect(agentBundles(ctx, g, ns.Name)).To(HaveKey("fleet-agent-y"))
	}).WithTimeout(timeout).Should(Succeed(), "the other cluster gets its agent Bundle")
	got := &fleet.Bundle{}
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(foreign), got)).To(Succeed())
	g.Expect(got.Spec.Resources[0].Content).To(ContainSubstring("name: mine"), "a Bundle the manager did not make is not overwritten")
}
