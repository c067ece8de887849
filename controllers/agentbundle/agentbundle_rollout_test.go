package agentbundle

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func TestPlan(t *testing.T) {
	const old, img = "agent:v1", "agent:v2"
	ready := Candidate{Current: old, Available: true}
	for _, tc := range []struct {
		name   string
		cands  []Candidate
		budget int
		want   []string
	}{
		{"moves as many as the budget", []Candidate{ready, ready, ready, ready}, 2, []string{img, img, old, old}},
		{"in flight on the new image counts", []Candidate{{Current: img}, ready, ready}, 2, []string{img, img, old}},
		{"a done cluster costs nothing", []Candidate{{Current: img, Available: true}, ready, ready}, 1, []string{img, img, old}},
		{"budget spent by clusters not Ready", []Candidate{{Current: old}, {Current: old}, ready}, 2, []string{img, img, old}},
		{"a broken image stops the rollout", []Candidate{{Current: "agent:broken"}, ready, ready}, 1, []string{img, old, old}},
		{"a new cluster waits its turn", []Candidate{{Current: img}, {}, ready}, 1, []string{img, "", old}},
		{"a new cluster is created within budget", []Candidate{{}, {}}, 1, []string{img, ""}},
		{"all done", []Candidate{{Current: img, Available: true}}, 1, []string{img}},
		{"a cluster outside its deployment window keeps its image", []Candidate{{Current: old, Available: true, Held: true}, ready}, 1, []string{old, img}},
		{"a held cluster not Ready costs nothing", []Candidate{{Current: old, Held: true}, ready}, 1, []string{old, img}},
		{"a held new cluster gets no agent Bundle before its window", []Candidate{{Held: true}, {}}, 2, []string{"", img}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(Plan(tc.cands, img, tc.budget)).To(Equal(tc.want))
		})
	}
}

func TestBudget(t *testing.T) {
	g := NewWithT(t)
	for _, tc := range []struct {
		v     intstr.IntOrString
		total int
		want  int
	}{
		{DefaultMaxUnavailable, 10, 1}, {DefaultMaxUnavailable, 100, 10}, {DefaultMaxUnavailable, 0, 1},
		{intstr.FromString("25%"), 10, 2}, {intstr.FromInt32(3), 10, 3}, {intstr.FromInt32(0), 10, 1},
	} {
		n, err := Budget(tc.v, tc.total)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(n).To(Equal(tc.want), "%s of %d", tc.v.String(), tc.total)
	}
	_, err := Budget(intstr.FromString("ten"), 10)
	g.Expect(err).To(MatchError(ContainSubstring(`maxUnavailable "ten"`)))
}

func TestDesired(t *testing.T) {
	g := NewWithT(t)
	c := &fleet.Cluster{}
	c.Namespace, c.Name, c.UID = "fleet-default", "edge-1", "uid-1"
	c.Spec.AgentEnvVars = []corev1.EnvVar{{Name: "HTTPS_PROXY", Value: "http://proxy:3128"}}
	c.Spec.PrivateRepoURL = "reg.local"
	c.Spec.RedeployAgentGeneration = 3
	c.Status.Agent.Namespace = "edge-agent"
	b, err := Desired(c, "ghcr.io/gitfleet/fleet-agent:v2", "", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Name).To(Equal("fleet-agent-edge-1"))
	g.Expect(b.Spec.Targets).To(Equal([]fleet.BundleTarget{{Name: "cluster", ClusterName: "edge-1"}}))
	g.Expect(b.Spec.KeepResources).To(BeTrue(), "deleting the Bundle must not uninstall the agent")
	g.Expect(b.Spec.DefaultNamespace).To(Equal("edge-agent"), "where the agent says it runs")
	g.Expect(b.Annotations[fleet.AgentImageAnnotation]).To(Equal("ghcr.io/gitfleet/fleet-agent:v2"))
	g.Expect(b.Spec.Resources).To(HaveLen(1))
	dep := &appsv1.Deployment{}
	g.Expect(yaml.Unmarshal([]byte(b.Spec.Resources[0].Content[4:]), dep)).To(Succeed())
	g.Expect(dep.Kind).To(Equal("Deployment"), "only the Deployment: no Secret, no ConfigMap")
	g.Expect(dep.Namespace).To(Equal("edge-agent"))
	ctr := dep.Spec.Template.Spec.Containers[0]
	g.Expect(ctr.Image).To(Equal("reg.local/gitfleet/fleet-agent:v2"))
	g.Expect(ctr.Env).To(ContainElement(corev1.EnvVar{Name: "HTTPS_PROXY", Value: "http://proxy:3128"}))
	g.Expect(dep.Spec.Template.Annotations[RedeployAnnotation]).To(Equal("3"))
	g.Expect(dep.Spec.Strategy.RollingUpdate.MaxUnavailable.IntValue()).To(BeZero())

	// The hash follows the settings.
	c.Spec.AgentEnvVars = nil
	b2, err := Desired(c, "ghcr.io/gitfleet/fleet-agent:v2", "", nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b2.Labels[fleet.AgentBundleHashLabel]).NotTo(Equal(b.Labels[fleet.AgentBundleHashLabel]))

	// The manager's pull secrets, unless the Cluster names its own.
	pulled := func(b *fleet.Bundle) []corev1.LocalObjectReference {
		dep := &appsv1.Deployment{}
		g.Expect(yaml.Unmarshal([]byte(b.Spec.Resources[0].Content[4:]), dep)).To(Succeed())
		return dep.Spec.Template.Spec.ImagePullSecrets
	}
	b3, err := Desired(c, "ghcr.io/gitfleet/fleet-agent:v2", "", []string{"manager-pull"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pulled(b3)).To(Equal([]corev1.LocalObjectReference{{Name: "manager-pull"}}))
	c.Spec.AgentPullSecrets = &[]corev1.LocalObjectReference{{Name: "edge-pull"}}
	b4, err := Desired(c, "ghcr.io/gitfleet/fleet-agent:v2", "", []string{"manager-pull"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pulled(b4)).To(Equal([]corev1.LocalObjectReference{{Name: "edge-pull"}}))
	c.Spec.AgentPullSecrets = &[]corev1.LocalObjectReference{}
	b5, err := Desired(c, "ghcr.io/gitfleet/fleet-agent:v2", "", []string{"manager-pull"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(pulled(b5)).To(BeEmpty(), "an empty list is none, not the manager's")
}
