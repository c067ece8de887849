package agentmanifest

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func find[T client.Object](objs []client.Object) (T, int) {
	var zero T
	for i, o := range objs {
		if v, ok := o.(T); ok {
			return v, i
		}
	}
	return zero, -1
}

// A Cluster's agentSchedulingCustomization gives the agent Fleet's
// PriorityClass and PodDisruptionBudget, the PriorityClass before the
// Deployment that names it.
func TestSchedulingObjects(t *testing.T) {
	g := NewWithT(t)
	never := corev1.PreemptNever
	spec := &fleet.ClusterSpec{AgentNamespace: "agents", AgentSchedulingCustomization: &fleet.AgentSchedulingCustomization{
		PriorityClass:       &fleet.PriorityClassSpec{Value: 1000, PreemptionPolicy: &never},
		PodDisruptionBudget: &fleet.PodDisruptionBudgetSpec{MinAvailable: "50%"},
	}}
	objs, err := Objects(ClusterOptions(spec))
	g.Expect(err).NotTo(HaveOccurred())
	pc, pcAt := find[*schedulingv1.PriorityClass](objs)
	pdb, _ := find[*policyv1.PodDisruptionBudget](objs)
	dep, depAt := find[*appsv1.Deployment](objs)
	g.Expect(pcAt).To(BeNumerically("<", depAt))
	g.Expect(pc.Name).To(Equal(PriorityClassName))
	g.Expect(pc.Value).To(BeEquivalentTo(1000))
	g.Expect(pc.PreemptionPolicy).To(HaveValue(Equal(corev1.PreemptNever)))
	g.Expect(pc.Labels).To(HaveKeyWithValue("app", fleet.AgentName))
	g.Expect(pdb.Name).To(Equal(PodDisruptionBudgetName))
	g.Expect(pdb.Namespace).To(Equal("agents"))
	g.Expect(pdb.Spec.MinAvailable).To(HaveValue(Equal(intstr.FromString("50%"))))
	g.Expect(pdb.Spec.MaxUnavailable).To(BeNil())
	g.Expect(pdb.Spec.Selector.MatchLabels).To(Equal(dep.Spec.Template.Labels))
	g.Expect(dep.Spec.Template.Spec.PriorityClassName).To(Equal(PriorityClassName))

	// Without the customization: neither object, no priority class.
	objs, err = Objects(Options{})
	g.Expect(err).NotTo(HaveOccurred())
	_, pcAt = find[*schedulingv1.PriorityClass](objs)
	_, pdbAt := find[*policyv1.PodDisruptionBudget](objs)
	dep, _ = find[*appsv1.Deployment](objs)
	g.Expect([]int{pcAt, pdbAt}).To(Equal([]int{-1, -1}))
	g.Expect(dep.Spec.Template.Spec.PriorityClassName).To(BeEmpty())

	// agent-config leaves the Deployment out, and them with it.
	objs, err = Objects(Options{NoDeployment: true, Scheduling: spec.AgentSchedulingCustomization})
	g.Expect(err).NotTo(HaveOccurred())
	_, pcAt = find[*schedulingv1.PriorityClass](objs)
	g.Expect(pcAt).To(Equal(-1))
}

func TestPodDisruptionBudgetBounds(t *testing.T) {
	cases := []struct {
		name           string
		spec           fleet.PodDisruptionBudgetSpec
		min, max       *intstr.IntOrString
		wantErrContain string
	}{
		{name: "neither is maxUnavailable 0, as in Fleet", max: ptr.To(intstr.FromInt32(0))},
		{name: "a number", spec: fleet.PodDisruptionBudgetSpec{MaxUnavailable: "1"}, max: ptr.To(intstr.FromInt32(1))},
		{name: "a percentage", spec: fleet.PodDisruptionBudgetSpec{MinAvailable: "100%"}, min: ptr.To(intstr.FromString("100%"))},
		{name: "both", spec: fleet.PodDisruptionBudgetSpec{MinAvailable: "1", MaxUnavailable: "1"},
			wantErrContain: "spec.agentSchedulingCustomization.podDisruptionBudget: minAvailable (1) and maxUnavailable (1) are both set"},
		{name: "neither number nor percentage", spec: fleet.PodDisruptionBudgetSpec{MinAvailable: "one"},
			wantErrContain: `spec.agentSchedulingCustomization.podDisruptionBudget.minAvailable "one"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			objs, err := Objects(Options{Scheduling: &fleet.AgentSchedulingCustomization{PodDisruptionBudget: &tc.spec}})
			if tc.wantErrContain != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.wantErrContain)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			pdb, _ := find[*policyv1.PodDisruptionBudget](objs)
			g.Expect(pdb.Spec.MinAvailable).To(Equal(tc.min))
			g.Expect(pdb.Spec.MaxUnavailable).To(Equal(tc.max))
		})
	}
}

// Pull secrets: named ones are referenced, given ones are copied into the
// agent's namespace and referenced once.
func TestPullSecrets(t *testing.T) {
	g := NewWithT(t)
	src := &corev1.Secret{Type: corev1.SecretTypeDockerConfigJson, Data: map[string][]byte{".dockerconfigjson": []byte(`{"auths":{}}`)}}
	src.Name, src.Namespace = "regcred", "fleet-system"
	objs, err := Objects(Options{Namespace: "agents", ImagePullSecrets: []string{"regcred", "other"}, PullSecrets: []*corev1.Secret{src}})
	g.Expect(err).NotTo(HaveOccurred())
	var copied *corev1.Secret
	for _, o := range objs {
		if s, ok := o.(*corev1.Secret); ok && s.Name == "regcred" {
			copied = s
		}
	}
	g.Expect(copied).NotTo(BeNil())
	g.Expect(copied.Namespace).To(Equal("agents"))
	g.Expect(copied.Type).To(Equal(corev1.SecretTypeDockerConfigJson))
	g.Expect(copied.Data).To(Equal(src.Data))
	dep, _ := find[*appsv1.Deployment](objs)
	g.Expect(dep.Spec.Template.Spec.ImagePullSecrets).To(Equal([]corev1.LocalObjectReference{{Name: "regcred"}, {Name: "other"}}))
}

func TestAgentConfigTLSMode(t *testing.T) {
	g := NewWithT(t)
	for _, mode := range []string{"", TLSModeStrict, TLSModeSystemStore} {
		g.Expect((&AgentConfig{AgentTLSMode: mode}).Validate()).To(Succeed(), mode)
	}
	err := (&AgentConfig{AgentTLSMode: "lax"}).Validate()
	g.Expect(err).To(MatchError(ContainSubstring(`agent TLS mode "lax": must be "strict" or "system-store"`)))
	cm := &corev1.ConfigMap{Data: map[string]string{ConfigKey: "agentTLSMode: system-store\ngarbageCollectionInterval: 30m\n"}}
	cfg, err := ReadConfig(cm)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.AgentTLSMode).To(Equal(TLSModeSystemStore))
	g.Expect(cfg.GarbageCollectionInterval).To(Equal("30m"))
}

// A Cluster's spec.agentPullSecrets replace the manager's, which are the
// only ones copied downstream (Fleet's rule).
func TestClusterPullSecretsReplaceTheManagers(t *testing.T) {
	g := NewWithT(t)
	spec := &fleet.ClusterSpec{}
	names, copied := PullSecrets(spec, []string{"manager"})
	g.Expect(names).To(Equal([]string{"manager"}))
	g.Expect(copied).To(BeTrue())
	spec.AgentPullSecrets = &[]corev1.LocalObjectReference{{Name: "own"}, {Name: ""}}
	names, copied = PullSecrets(spec, []string{"manager"})
	g.Expect(names).To(Equal([]string{"own"}))
	g.Expect(copied).To(BeFalse())
	spec.AgentPullSecrets = &[]corev1.LocalObjectReference{}
	names, copied = PullSecrets(spec, []string{"manager"})
	g.Expect(names).To(BeEmpty())
	g.Expect(copied).To(BeFalse())
}
