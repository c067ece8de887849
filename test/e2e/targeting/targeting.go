package targeting

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

const ws = fleet.DefaultWorkspace

func createCluster(ctx context.Context, admin client.Client, name string, labels map[string]string) *fleet.Cluster {
	GinkgoHelper()
	c := &fleet.Cluster{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ws, Labels: labels},
		Spec:       fleet.ClusterSpec{ClientID: "id-" + name, TemplateValues: &fleet.GenericMap{Data: map[string]interface{}{"replicas": 3}}},
	}
	Expect(admin.Create(ctx, c)).To(Succeed())
	return c
}

func createBundle(ctx context.Context, admin client.Client, name string, spec fleet.BundleSpec) *fleet.Bundle {
	GinkgoHelper()
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ws}, Spec: spec}
	Expect(admin.Create(ctx, b)).To(Succeed())
	return b
}

// deploymentsByCluster returns the BundleDeployments of b by cluster name.
func deploymentsByCluster(ctx context.Context, admin client.Client, b *fleet.Bundle) map[string]*fleet.BundleDeployment {
	GinkgoHelper()
	list := &fleet.BundleDeploymentList{}
	Expect(admin.List(ctx, list, client.MatchingLabels{fleet.BundleNameLabel: b.Name, fleet.BundleNamespaceLabel: b.Namespace})).To(Succeed())
	out := map[string]*fleet.BundleDeployment{}
	for i := range list.Items {
		out[list.Items[i].Labels[fleet.ClusterLabel]] = &list.Items[i]
	}
	return out
}

// reportReady reports a deployment applied and Ready, as its agent would.
func reportReady(ctx context.Context, admin client.Client, bd *fleet.BundleDeployment) {
	GinkgoHelper()
	patch := client.MergeFrom(bd.DeepCopy())
	bd.Status.AppliedDeploymentID, bd.Status.Ready, bd.Status.NonModified = bd.Spec.DeploymentID, true, true
	Expect(admin.Status().Patch(ctx, bd, patch)).To(Succeed())
}

func selector(k, v string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
}

// appResources are the resources of most bundles here: one ConfigMap.
func appResources() []fleet.BundleResource {
	return []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\n"}}
}

// targeting is what the steps of TargetingSpec share.
type targeting struct {
	ctx             context.Context
	admin           client.Client
	dev, test, prod *fleet.Cluster
	app, same       *fleet.Bundle
	resources       []fleet.BundleResource
}

// TargetingSpec checks that Bundles reach exactly the clusters their targets
// select, with options customized per cluster, that status rolls up into
// Bundles and Clusters, that relabelling moves deployments and heartbeats do
// not, that a rollout moves one cluster at a time, that Content is shared
// and collected, and that invalid targets are reported. The manager's
// ContentGrace must be short (seconds). Call it in an Ordered container.
func TargetingSpec(ctx context.Context, inputGetter func() SpecInput) {
	s := &targeting{ctx: ctx, resources: appResources()}

	BeforeAll(func() {
		input := inputGetter()
		input.validate("TargetingSpec")
		s.admin = input.Admin
		s.dev = s.newCluster("dev-1", map[string]string{"env": "dev"})
		s.test = s.newCluster("test-1", map[string]string{"env": "test"})
		s.prod = s.newCluster("prod-1", map[string]string{"env": "prod", "region": "eu"})
		Expect(s.admin.Create(s.ctx, &fleet.ClusterGroup{
			ObjectMeta: metav1.ObjectMeta{Name: "europe", Namespace: ws, Labels: map[string]string{"geo": "eu"}},
			Spec:       fleet.ClusterGroupSpec{Selector: selector("region", "eu")},
		})).To(Succeed())
	})

	deploySteps(s)
	retargetSteps(s)
	rolloutSteps(s)
}

// deploySteps: a Bundle reaches the clusters it targets, with options
// customized per cluster, and their status rolls up.
func deploySteps(s *targeting) {
	It("writes one BundleDeployment per targeted cluster with its customized options", func() {
		s.app = s.newBundle("app", fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{
				DefaultNamespace: "app",
				Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]interface{}{
					"cluster": "${ .ClusterName }", "replicas": "${ .ClusterValues.replicas }",
				}}},
			},
			Resources: s.resources,
			Targets: []fleet.BundleTarget{
				{Name: "no-test", ClusterSelector: selector("env", "test"), DoNotDeploy: true},
				{Name: "eu", ClusterGroup: "europe", BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "app-eu"}},
				{Name: "dev", ClusterSelector: selector("env", "dev")},
			},
		})
		Eventually(s.clustersOf(s.app), 20*time.Second, 100*time.Millisecond).Should(ConsistOf("dev-1", "prod-1"))
		bds := s.deploymentsOf(s.app)
		Expect(bds["prod-1"].Namespace).To(Equal(names.ClusterNamespace(ws, "prod-1")))
		Expect(bds["prod-1"].Spec.Options.DefaultNamespace).To(Equal("app-eu"), "the group's customization")
		Expect(bds["dev-1"].Spec.Options.DefaultNamespace).To(Equal("app"))
		Expect(bds["dev-1"].Spec.Options.Helm.Values.Data).To(Equal(map[string]interface{}{"cluster": "dev-1", "replicas": float64(3)}))
		Expect(bds["dev-1"].Spec.DeploymentID).To(HavePrefix(bds["dev-1"].Labels[fleet.ContentNameLabel] + ":"))
		Expect(bds["dev-1"].Spec.DeploymentID).NotTo(Equal(bds["prod-1"].Spec.DeploymentID))
		content := &fleet.Content{}
		Expect(s.admin.Get(s.ctx, types.NamespacedName{Name: bds["dev-1"].Labels[fleet.ContentNameLabel]}, content)).To(Succeed())
		Expect(content.SHA256Sum).NotTo(BeEmpty())
	})

	It("rolls BundleDeployment status up into Bundle and Cluster status", func() {
		for _, bd := range s.deploymentsOf(s.app) {
			s.markReady(bd)
		}
		Eventually(func(g Gomega) {
			b := &fleet.Bundle{}
			g.Expect(s.admin.Get(s.ctx, client.ObjectKeyFromObject(s.app), b)).To(Succeed())
			g.Expect(b.Status.Display.ReadyClusters).To(Equal("2/2"))
			g.Expect(meta.IsStatusConditionTrue(b.Status.Conditions, fleet.ConditionReady)).To(BeTrue())
			c := &fleet.Cluster{}
			g.Expect(s.admin.Get(s.ctx, client.ObjectKeyFromObject(s.prod), c)).To(Succeed())
			g.Expect(c.Status.Display.ReadyBundles).To(Equal("1/1"))
			g.Expect(c.Status.Namespace).To(Equal(names.ClusterNamespace(ws, "prod-1")))
			g.Expect(c.Status.Display.State).To(Equal(fleet.ClusterStateWaitCheckIn))
		}, 20*time.Second, 100*time.Millisecond).Should(Succeed())

		bd := s.deploymentsOf(s.app)["dev-1"]
		patch := client.MergeFrom(bd.DeepCopy())
		bd.Status.Ready = false
		bd.Status.NonReadyStatus = []fleet.NonReadyStatus{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "app", Name: "web", Summary: fleet.Summary{State: "updating", Transitioning: true, Message: []string{"0/1 available"}}}}
		Expect(s.admin.Status().Patch(s.ctx, bd, patch)).To(Succeed())
		Eventually(func(g Gomega) {
			b := &fleet.Bundle{}
			g.Expect(s.admin.Get(s.ctx, client.ObjectKeyFromObject(s.app), b)).To(Succeed())
			c := meta.FindStatusCondition(b.Status.Conditions, fleet.ConditionReady)
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring("fleet-default/dev-1 NotReady: deployment.apps app/web 0/1 available"), "in Fleet's words")
			g.Expect(b.Status.Summary.NonReadyResources).To(ContainElement(And(
				HaveField("State", fleet.NotReady),
				HaveField("NonReadyStatus", ConsistOf(HaveField("Summary.Message", []string{"0/1 available"}))),
			)), "the summary carries the deployment's nonReadyStatus")
		}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	})
}

// retargetSteps: relabelling a cluster moves its deployments, and its
// heartbeats do not.
func retargetSteps(s *targeting) {
	It("does not re-target on heartbeats", func() {
		before := s.deploymentsOf(s.app)
		unchanged := func(g Gomega) {
			for name, bd := range s.deploymentsOf(s.app) {
				g.Expect(bd.ResourceVersion).To(Equal(before[name].ResourceVersion), "no write to %s", name)
			}
		}
		for range 5 {
			c := s.prod.DeepCopy()
			Expect(s.admin.Status().Patch(s.ctx, c, client.RawPatch(types.MergePatchType,
				[]byte(fmt.Sprintf(`{"status":{"agent":{"lastSeen":%q}}}`, time.Now().UTC().Format(time.RFC3339)))))).To(Succeed())
			// Heartbeats come apart in time, as agents' do.
			e2e.HoldsFor("no BundleDeployment is written after a heartbeat", unchanged, 100*time.Millisecond, 20*time.Millisecond)
		}
		Consistently(unchanged, time.Second, 100*time.Millisecond).Should(Succeed())
	})

	It("moves BundleDeployments when a cluster is relabelled, writing only what changes", func() {
		before := s.deploymentsOf(s.app)
		patch := client.MergeFrom(s.test.DeepCopy())
		s.test.Labels["env"] = "dev"
		Expect(s.admin.Patch(s.ctx, s.test, patch)).To(Succeed())
		Eventually(s.clustersOf(s.app), 20*time.Second, 100*time.Millisecond).Should(ConsistOf("dev-1", "test-1", "prod-1"))
		after := s.deploymentsOf(s.app)
		Expect(after["prod-1"].ResourceVersion).To(Equal(before["prod-1"].ResourceVersion))

		patch = client.MergeFrom(s.dev.DeepCopy())
		s.dev.Labels["env"] = "staging"
		Expect(s.admin.Patch(s.ctx, s.dev, patch)).To(Succeed())
		Eventually(s.clustersOf(s.app), 20*time.Second, 100*time.Millisecond).Should(ConsistOf("test-1", "prod-1"))

		By("showing the cluster left with no deployments as such")
		Eventually(func(g Gomega) {
			c := &fleet.Cluster{}
			g.Expect(s.admin.Get(s.ctx, client.ObjectKeyFromObject(s.dev), c)).To(Succeed())
			g.Expect(c.Status.Display.ReadyBundles).To(Equal("0/0"))
			g.Expect(c.Status.Summary).To(Equal(fleet.BundleSummary{}))
		}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	})
}

// rolloutSteps: a change rolls out one cluster at a time, Content is shared
// and collected, and invalid targets are reported.
func rolloutSteps(s *targeting) {
	It("rolls a change out one cluster at a time as deployments become Ready", func() {
		one := intstr.FromInt32(1)
		b := s.newBundle("rollout", fleet.BundleSpec{Resources: s.resources,
			RolloutStrategy: &fleet.RolloutStrategy{MaxUnavailable: &one},
			Targets:         []fleet.BundleTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{}}}})
		Eventually(s.clustersOf(b), 20*time.Second, 100*time.Millisecond).Should(HaveLen(3))
		for _, bd := range s.deploymentsOf(b) {
			s.markReady(bd)
		}
		Eventually(func(g Gomega) string {
			g.Expect(s.admin.Get(s.ctx, client.ObjectKeyFromObject(b), b)).To(Succeed())
			return b.Status.Display.ReadyClusters
		}, 20*time.Second, 100*time.Millisecond).Should(Equal("3/3"))
		old := s.deploymentsOf(b)["prod-1"].Spec.DeploymentID

		By("changing the bundle: one cluster moves, the others only stage the change")
		b.Spec.Resources = []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-v2}\n"}}
		Expect(s.admin.Update(s.ctx, b)).To(Succeed())
		moved := func(g Gomega) []*fleet.BundleDeployment {
			var out []*fleet.BundleDeployment
			for _, bd := range s.deploymentsOf(b) {
				g.Expect(bd.Spec.StagedDeploymentID).NotTo(Equal(old), "%s has the change staged", bd.Namespace)
				if bd.Spec.DeploymentID != old {
					out = append(out, bd)
				}
			}
			return out
		}
		for n := 1; n <= 3; n++ {
			var now []*fleet.BundleDeployment
			Eventually(func(g Gomega) {
				now = moved(g)
				g.Expect(now).To(HaveLen(n))
			}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
			Consistently(func(g Gomega) { g.Expect(moved(g)).To(HaveLen(n)) }, time.Second, 100*time.Millisecond).
				Should(Succeed(), "at most one cluster unavailable")
			By(fmt.Sprintf("reporting the moved clusters Ready (%d of 3): only their status changes", n))
			for _, bd := range now {
				s.markReady(bd)
			}
		}
		Expect(s.admin.Delete(s.ctx, b)).To(Succeed())
		Eventually(s.clustersOf(b), 20*time.Second, 100*time.Millisecond).Should(BeEmpty())
	})

	It("shares Content between bundles with the same resources and collects it when unused", func() {
		s.same = s.newBundle("same", fleet.BundleSpec{Resources: s.resources,
			Targets: []fleet.BundleTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{}}}})
		Eventually(s.clustersOf(s.same), 20*time.Second, 100*time.Millisecond).Should(HaveLen(3))
		contentName := s.deploymentsOf(s.same)["prod-1"].Labels[fleet.ContentNameLabel]
		Expect(contentName).To(Equal(s.deploymentsOf(s.app)["prod-1"].Labels[fleet.ContentNameLabel]))
		Eventually(func() int {
			c := &fleet.Content{}
			Expect(s.admin.Get(s.ctx, types.NamespacedName{Name: contentName}, c)).To(Succeed())
			return c.Status.ReferenceCount
		}, 20*time.Second, 100*time.Millisecond).Should(Equal(5))

		By("deleting both bundles")
		Expect(s.admin.Delete(s.ctx, s.app)).To(Succeed())
		Expect(s.admin.Delete(s.ctx, s.same)).To(Succeed())
		Eventually(s.clustersOf(s.app), 20*time.Second, 100*time.Millisecond).Should(BeEmpty())
		Eventually(s.clustersOf(s.same), 20*time.Second, 100*time.Millisecond).Should(BeEmpty())
		Eventually(func() bool {
			return apierrors.IsNotFound(s.admin.Get(s.ctx, types.NamespacedName{Name: contentName}, &fleet.Content{}))
		}, 30*time.Second, 200*time.Millisecond).Should(BeTrue(), "unreferenced content is deleted")
	})

	It("reports invalid targets on the Bundle", func() {
		bad := s.newBundle("bad", fleet.BundleSpec{Resources: s.resources, Targets: []fleet.BundleTarget{{
			Name: "broken", ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Near"}}},
		}}})
		Eventually(func(g Gomega) {
			b := &fleet.Bundle{}
			g.Expect(s.admin.Get(s.ctx, client.ObjectKeyFromObject(bad), b)).To(Succeed())
			c := meta.FindStatusCondition(b.Status.Conditions, fleet.ConditionReady)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Message).To(ContainSubstring(`target "broken"`))
		}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
	})
}

// newCluster creates a Cluster with labels.
func (s *targeting) newCluster(name string, labels map[string]string) *fleet.Cluster {
	GinkgoHelper()
	return createCluster(s.ctx, s.admin, name, labels)
}

// newBundle creates a Bundle.
func (s *targeting) newBundle(name string, spec fleet.BundleSpec) *fleet.Bundle {
	GinkgoHelper()
	return createBundle(s.ctx, s.admin, name, spec)
}

// deploymentsOf returns b's BundleDeployments by cluster.
func (s *targeting) deploymentsOf(b *fleet.Bundle) map[string]*fleet.BundleDeployment {
	GinkgoHelper()
	return deploymentsByCluster(s.ctx, s.admin, b)
}

// clustersOf returns the clusters b is deployed to, for Eventually.
func (s *targeting) clustersOf(b *fleet.Bundle) func() []string {
	return func() []string {
		deployments := s.deploymentsOf(b)
		out := make([]string, 0, len(deployments))
		for c := range deployments {
			out = append(out, c)
		}
		return out
	}
}

// markReady reports bd Ready, as its agent would.
func (s *targeting) markReady(bd *fleet.BundleDeployment) {
	GinkgoHelper()
	reportReady(s.ctx, s.admin, bd)
}
