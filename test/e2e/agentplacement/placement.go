package agentplacement

import (
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/agentmanifest"
	"github.com/gitfleet/fleet/internal/kubeconfig"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// SpecInput is what PlacementSpec runs against.
type SpecInput struct {
	// Upstream is the manager's control plane, Admin an admin client of it.
	Upstream *controlplane.ControlPlane
	Admin    client.Client
	// Downstream joins by token, then is imported a second time into
	// another agent namespace.
	Downstream *controlplane.ControlPlane
	// LogDir receives the agents' logs.
	LogDir string
	// MetricsURL is the manager's metrics endpoint; the manager runs with
	// PerObjectMetrics, AgentBundles and AgentImagePullSecrets
	// [PullSecret] in SystemNamespace.
	MetricsURL      string
	PullSecret      string
	SystemNamespace string
}

const (
	waitJoin  = 2 * time.Minute
	waitAgent = 2 * time.Minute
	// importedNS is the agent namespace of the imported Cluster.
	importedNS = "fleet-imported"
)

// placement is what the steps of PlacementSpec share.
type placement struct {
	ctx    context.Context
	in     SpecInput
	joined *e2e.JoinedCluster
	local  client.Client
}

// PlacementSpec checks that a Cluster's agentSchedulingCustomization and the
// manager's pull secrets reach the agent, and go with it. Call it in an Ordered
// container.
func PlacementSpec(ctx context.Context, inputGetter func() SpecInput) {
	s := &placement{ctx: ctx}
	BeforeAll(func() {
		s.in = inputGetter()
		Expect(s.in.MetricsURL).NotTo(BeEmpty(), "PlacementSpec: SpecInput.MetricsURL is required")
		s.joined = e2e.Join(ctx, e2e.JoinInput{Upstream: s.in.Upstream, Downstream: s.in.Downstream, Admin: s.in.Admin,
			LogDir: s.in.LogDir}, waitJoin)
		DeferCleanup(s.joined.StopAgents)
		s.local = s.joined.Local
	})
	tokenSteps(s)
	// Before the import: importing the same cluster again takes over its
	// identity, and the token-registered Cluster goes (the Adopting event).
	metricsSteps(s)
	importSteps(s)
}

func tokenSteps(s *placement) {
	It("gives a token-registered agent its PriorityClass, PodDisruptionBudget and pull secrets through its agent Bundle", func() {
		never := corev1.PreemptNever
		s.setScheduling(s.joined.Cluster, &fleet.AgentSchedulingCustomization{
			PriorityClass:       &fleet.PriorityClassSpec{Value: 1000, PreemptionPolicy: &never},
			PodDisruptionBudget: &fleet.PodDisruptionBudgetSpec{MinAvailable: "1"},
		})
		e2e.WaitFor("the agent to deploy its PriorityClass, PodDisruptionBudget and Deployment", func(g Gomega) {
			pc := &schedulingv1.PriorityClass{}
			g.Expect(s.local.Get(s.ctx, types.NamespacedName{Name: agentmanifest.PriorityClassName}, pc)).To(Succeed())
			g.Expect(pc.Value).To(BeEquivalentTo(1000))
			g.Expect(pc.PreemptionPolicy).To(HaveValue(Equal(corev1.PreemptNever)))
			pdb := &policyv1.PodDisruptionBudget{}
			g.Expect(s.local.Get(s.ctx, types.NamespacedName{Namespace: fleet.DefaultSystemNamespace, Name: agentmanifest.PodDisruptionBudgetName}, pdb)).To(Succeed())
			g.Expect(pdb.Spec.MinAvailable).To(HaveValue(Equal(intstr.FromInt32(1))))
			dep := s.agentDeployment(g, fleet.DefaultSystemNamespace)
			g.Expect(dep.Spec.Template.Spec.PriorityClassName).To(Equal(agentmanifest.PriorityClassName))
			g.Expect(dep.Spec.Template.Spec.ImagePullSecrets).To(ConsistOf(corev1.LocalObjectReference{Name: s.in.PullSecret}))
		}, waitAgent, 500*time.Millisecond)
	})

	It("removes them when the customization goes", func() {
		s.setScheduling(s.joined.Cluster, nil)
		e2e.WaitFor("the PriorityClass and PodDisruptionBudget to go", func(g Gomega) {
			s.expectGone(g, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: agentmanifest.PriorityClassName}})
			s.expectGone(g, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{
				Namespace: fleet.DefaultSystemNamespace, Name: agentmanifest.PodDisruptionBudgetName}})
			g.Expect(s.agentDeployment(g, fleet.DefaultSystemNamespace).Spec.Template.Spec.PriorityClassName).To(BeEmpty())
		}, waitAgent, 500*time.Millisecond)
	})

	It("pulls the agent with the Cluster's own spec.agentPullSecrets instead of the manager's, and with the manager's again once unset", func() {
		setPullSecrets := func(refs *[]corev1.LocalObjectReference) {
			Eventually(func() error {
				got := &fleet.Cluster{}
				if err := s.in.Admin.Get(s.ctx, client.ObjectKeyFromObject(s.joined.Cluster), got); err != nil {
					return err
				}
				got.Spec.AgentPullSecrets = refs
				return s.in.Admin.Update(s.ctx, got)
			}).Should(Succeed())
		}
		setPullSecrets(&[]corev1.LocalObjectReference{{Name: "edge-registry"}})
		e2e.WaitFor("the agent Deployment pulled with edge-registry", func(g Gomega) {
			g.Expect(s.agentDeployment(g, fleet.DefaultSystemNamespace).Spec.Template.Spec.ImagePullSecrets).
				To(ConsistOf(corev1.LocalObjectReference{Name: "edge-registry"}))
		}, waitAgent, 500*time.Millisecond)
		setPullSecrets(nil)
		e2e.WaitFor("the agent Deployment pulled with the manager's pull secret", func(g Gomega) {
			g.Expect(s.agentDeployment(g, fleet.DefaultSystemNamespace).Spec.Template.Spec.ImagePullSecrets).
				To(ConsistOf(corev1.LocalObjectReference{Name: s.in.PullSecret}))
		}, waitAgent, 500*time.Millisecond)
	})
}

func importSteps(s *placement) {
	var imported *fleet.Cluster
	It("installs an imported cluster's agent with them, its pull secret copied", func() {
		kc, err := kubeconfig.FromREST(s.in.Downstream.Config, "imported")
		Expect(err).NotTo(HaveOccurred())
		secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.DefaultWorkspace, Name: "imported-kubeconfig"},
			Data: map[string][]byte{fleet.KubeConfigSecretValueKey: kc}}
		Expect(s.in.Admin.Create(s.ctx, secret)).To(Succeed())
		imported = &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.DefaultWorkspace, Name: "imported"},
			Spec: fleet.ClusterSpec{KubeConfigSecret: secret.Name, AgentNamespace: importedNS,
				AgentSchedulingCustomization: &fleet.AgentSchedulingCustomization{
					PriorityClass:       &fleet.PriorityClassSpec{Value: 500},
					PodDisruptionBudget: &fleet.PodDisruptionBudgetSpec{},
				}}}
		Expect(s.in.Admin.Create(s.ctx, imported)).To(Succeed())
		e2e.WaitFor("the manager to install the imported cluster's agent", func(g Gomega) {
			pc := &schedulingv1.PriorityClass{}
			g.Expect(s.local.Get(s.ctx, types.NamespacedName{Name: agentmanifest.PriorityClassName}, pc)).To(Succeed())
			g.Expect(pc.Value).To(BeEquivalentTo(500))
			pdb := &policyv1.PodDisruptionBudget{}
			g.Expect(s.local.Get(s.ctx, types.NamespacedName{Namespace: importedNS, Name: agentmanifest.PodDisruptionBudgetName}, pdb)).To(Succeed())
			g.Expect(pdb.Spec.MaxUnavailable).To(HaveValue(Equal(intstr.FromInt32(0))), "neither bound: maxUnavailable 0, as in Fleet")
			copied := &corev1.Secret{}
			g.Expect(s.local.Get(s.ctx, types.NamespacedName{Namespace: importedNS, Name: s.in.PullSecret}, copied)).To(Succeed())
			g.Expect(copied.Type).To(Equal(corev1.SecretTypeDockerConfigJson))
			dep := s.agentDeployment(g, importedNS)
			g.Expect(dep.Spec.Template.Spec.PriorityClassName).To(Equal(agentmanifest.PriorityClassName))
			g.Expect(dep.Spec.Template.Spec.ImagePullSecrets).To(ConsistOf(corev1.LocalObjectReference{Name: s.in.PullSecret}))
			cm := &corev1.ConfigMap{}
			g.Expect(s.local.Get(s.ctx, types.NamespacedName{Namespace: importedNS, Name: fleet.AgentName}, cm)).To(Succeed())
			cfg, err := agentinstall.ReadConfig(cm)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cfg.AgentTLSMode).To(Equal(agentmanifest.TLSModeSystemStore))
			g.Expect(cfg.GarbageCollectionInterval).To(Equal("30m0s"))
			got := &fleet.Cluster{}
			g.Expect(s.in.Admin.Get(s.ctx, client.ObjectKeyFromObject(imported), got)).To(Succeed())
			g.Expect(got.Status.AgentTLSMode).To(Equal(agentmanifest.TLSModeSystemStore))
			g.Expect(got.Status.GarbageCollectionInterval).To(HaveValue(Equal(metav1.Duration{Duration: 30 * time.Minute})))
		}, waitAgent, 500*time.Millisecond)
	})

	It("removes them with the agent when the Cluster goes", func() {
		Expect(s.in.Admin.Delete(s.ctx, imported)).To(Succeed())
		e2e.WaitFor("the imported agent, its PriorityClass and PodDisruptionBudget to go", func(g Gomega) {
			s.expectGone(g, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: importedNS, Name: fleet.AgentName}})
			s.expectGone(g, &schedulingv1.PriorityClass{ObjectMeta: metav1.ObjectMeta{Name: agentmanifest.PriorityClassName}})
			s.expectGone(g, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: importedNS, Name: agentmanifest.PodDisruptionBudgetName}})
			s.expectGone(g, imported)
		}, waitAgent, 500*time.Millisecond)
		By("the token-registered agent's Deployment stays")
		Eventually(func(g Gomega) { s.agentDeployment(g, fleet.DefaultSystemNamespace) }).Should(Succeed())
	})
}

func metricsSteps(s *placement) {
	It("serves Fleet's per-object series, fleet_bundle_state among them", func() {
		agentBundle := names.AgentBundle(s.joined.Cluster.Name)
		Expect(s.in.Admin.Get(s.ctx, client.ObjectKeyFromObject(s.joined.Cluster), &fleet.Cluster{})).To(Succeed(),
			"the token-registered Cluster is there")
		e2e.WaitFor("fleet_bundle_state and fleet_cluster_state of the joined cluster", func(g Gomega) {
			body := s.scrape(g)
			// Nothing runs the agent's pods downstream (no kubelet), so its
			// Bundle may be anything but ready: one state of seven is 1.
			states := series(body, "fleet_bundle_state", `name="`+agentBundle+`"`)
			g.Expect(states).To(HaveLen(7), "one series per bundle state:\n%s", body)
			g.Expect(states).To(ContainElement(HaveSuffix(" 1")))
			g.Expect(series(body, "fleet_cluster_state", `name="`+s.joined.Cluster.Name+`"`)).To(HaveLen(3), "NotReady, Ready, WaitCheckIn")
			g.Expect(series(body, "fleet_bundledeployment_state", `bundle="`+agentBundle+`"`)).NotTo(BeEmpty())
			g.Expect(series(body, "fleet_per_object_metrics_dropped_objects")).To(ConsistOf("fleet_per_object_metrics_dropped_objects 0"))
		}, waitAgent, time.Second)
	})
}

// setScheduling sets (or, nil, removes) a Cluster's
// agentSchedulingCustomization, as an admin.
func (s *placement) setScheduling(c *fleet.Cluster, sc *fleet.AgentSchedulingCustomization) {
	GinkgoHelper()
	Eventually(func() error {
		got := &fleet.Cluster{}
		if err := s.in.Admin.Get(s.ctx, client.ObjectKeyFromObject(c), got); err != nil {
			return err
		}
		got.Spec.AgentSchedulingCustomization = sc
		return s.in.Admin.Update(s.ctx, got)
	}).Should(Succeed())
}

func (s *placement) agentDeployment(g Gomega, namespace string) *appsv1.Deployment {
	dep := &appsv1.Deployment{}
	g.Expect(s.local.Get(s.ctx, types.NamespacedName{Namespace: namespace, Name: fleet.AgentName}, dep)).To(Succeed())
	return dep
}

// expectGone checks obj is gone from whichever side holds its kind.
func (s *placement) expectGone(g Gomega, obj client.Object) {
	c := s.local
	if _, ok := obj.(*fleet.Cluster); ok {
		c = s.in.Admin
	}
	err := c.Get(s.ctx, client.ObjectKeyFromObject(obj), obj)
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%T %s: want NotFound, got %v", obj, client.ObjectKeyFromObject(obj), err)
}

func (s *placement) scrape(g Gomega) string {
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get(s.in.MetricsURL)
	g.Expect(err).NotTo(HaveOccurred(), "scraping %s", s.in.MetricsURL)
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	g.Expect(err).NotTo(HaveOccurred())
	return string(body)
}

// series are the lines of metric in body whose labels hold every one of
// labels.
func series(body, metric string, labels ...string) []string {
	line := regexp.MustCompile(`^` + metric + `(\{[^}]*\})? \S+$`)
	var out []string
lines:
	for _, l := range strings.Split(body, "\n") {
		if !line.MatchString(l) {
			continue
		}
		for _, want := range labels {
			if !strings.Contains(l, want) {
				continue lines
			}
		}
		out = append(out, l)
	}
	return out
}
