package agentmanifest

import (
	"fmt"

	policyv1 "k8s.io/api/policy/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Names of the agent's PriorityClass and PodDisruptionBudget (Fleet's).
const (
	PriorityClassName       = "fleet-agent-priority-class"
	PodDisruptionBudgetName = "fleet-agent-pod-disruption-budget"
)

// TLS modes of the agent's connection to the manager (Fleet's
// agentTLSMode). Strict trusts only the CA the agent was given, or the
// system's store when it was given none; SystemStore trusts the system's
// store as well as that CA.
const (
	TLSModeStrict      = "strict"
	TLSModeSystemStore = "system-store"
)

// ValidateTLSMode says what is wrong with a TLS mode; empty is strict.
func ValidateTLSMode(mode string) error {
	switch mode {
	case "", TLSModeStrict, TLSModeSystemStore:
		return nil
	}
	return fmt.Errorf("agent TLS mode %q: must be %q or %q", mode, TLSModeStrict, TLSModeSystemStore)
}

// priorityClass renders the agent's PriorityClass (cluster-scoped: one per
// downstream cluster, as in Fleet).
func priorityClass(spec *fleet.PriorityClassSpec, labels map[string]string) *schedulingv1.PriorityClass {
	return &schedulingv1.PriorityClass{
		TypeMeta:         metav1.TypeMeta{APIVersion: "scheduling.k8s.io/v1", Kind: "PriorityClass"},
		ObjectMeta:       metav1.ObjectMeta{Name: PriorityClassName, Labels: labels},
		Value:            int32(spec.Value), // the CRD bounds it to ±1e9
		Description:      "Priority class for the fleet agent",
		PreemptionPolicy: spec.PreemptionPolicy,
	}
}

// podDisruptionBudget renders the agent's PodDisruptionBudget: neither
// bound set is maxUnavailable 0, as in Fleet; both set is an error.
func podDisruptionBudget(spec *fleet.PodDisruptionBudgetSpec, meta metav1.ObjectMeta) (*policyv1.PodDisruptionBudget, error) {
	meta.Name = PodDisruptionBudgetName
	pdb := &policyv1.PodDisruptionBudget{
		TypeMeta:   metav1.TypeMeta{APIVersion: "policy/v1", Kind: "PodDisruptionBudget"},
		ObjectMeta: meta,
		Spec: policyv1.PodDisruptionBudgetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": fleet.AgentName}},
		},
	}
	parse := func(field, v string) (*intstr.IntOrString, error) {
		x := intstr.Parse(v)
		if _, err := intstr.GetScaledValueFromIntOrPercent(&x, 100, true); err != nil || (x.Type == intstr.Int && x.IntVal < 0) {
			return nil, fmt.Errorf("spec.agentSchedulingCustomization.podDisruptionBudget.%s %q: must be a number or a percentage", field, v)
		}
		return &x, nil
	}
	var err error
	switch {
	case spec.MinAvailable != "" && spec.MaxUnavailable != "":
		return nil, fmt.Errorf("spec.agentSchedulingCustomization.podDisruptionBudget: minAvailable (%s) and maxUnavailable (%s) are both set: set one",
			spec.MinAvailable, spec.MaxUnavailable)
	case spec.MinAvailable != "":
		pdb.Spec.MinAvailable, err = parse("minAvailable", spec.MinAvailable)
	case spec.MaxUnavailable != "":
		pdb.Spec.MaxUnavailable, err = parse("maxUnavailable", spec.MaxUnavailable)
	default:
		pdb.Spec.MaxUnavailable = ptrIntOrString(intstr.FromInt32(0))
	}
	if err != nil {
		return nil, err
	}
	return pdb, nil
}

func ptrIntOrString(v intstr.IntOrString) *intstr.IntOrString { return &v }
