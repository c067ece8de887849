package install

import (
	"fmt"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/names"
)

// AgentLeasePolicyName names the admission policy that lets an agent create
// only its check-in Lease.
const AgentLeasePolicyName = "fleet-agent-leases"

// agentLeasePolicy refuses a Lease created by an agent (a ServiceAccount of
// the agents' namespace, names.AgentIdentityNamespace of ns) under any name
// but fleet.AgentLeaseName. RBAC lets an agent create Leases in its cluster
// namespace, as create cannot be limited to a name; without this an agent
// could fill that namespace with Leases.
func agentLeasePolicy(ns string) *admissionv1.ValidatingAdmissionPolicy {
	fail := admissionv1.Fail
	return &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: AgentLeasePolicyName, Labels: map[string]string{"app": ManagerName}},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule: admissionv1.Rule{APIGroups: []string{"coordination.k8s.io"}, APIVersions: []string{"*"},
						Resources: []string{"leases"}},
				},
			}}},
			MatchConditions: []admissionv1.MatchCondition{{
				Name:       "fleet-agent",
				Expression: fmt.Sprintf("request.userInfo.username.startsWith('system:serviceaccount:%s:')", names.AgentIdentityNamespace(ns)),
			}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("object.metadata.name == '%s'", fleet.AgentLeaseName),
				Message:    fmt.Sprintf("a fleet agent creates only its check-in Lease, %s, in its cluster namespace", fleet.AgentLeaseName),
				Reason:     ptrTo(metav1.StatusReasonForbidden),
			}},
		},
	}
}
