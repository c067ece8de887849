package install

import (
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// CAPIAgentSettingsPolicyName names the admission policy that lets only
// those allowed to configure an agent ask for agent settings on a Cluster
// API Cluster.
const CAPIAgentSettingsPolicyName = "fleet-capi-agent-settings"

// CAPIAgentSettingsAnnotations are the annotations of a Cluster API Cluster
// that the manager, which holds ConfigureAgentVerb, copies into the agent
// settings of the fleet Cluster it enrolls (controllers/capi keeps the same
// names; a test holds them equal).
var CAPIAgentSettingsAnnotations = []string{
	"fleet.cattle.io/agent-namespace", "fleet.cattle.io/host-network", "fleet.cattle.io/agent-tolerations",
}

// CAPIAgentSettingsVariables are the ClusterClass variables of a Cluster API
// Cluster (spec.topology.variables) that say the same as
// CAPIAgentSettingsAnnotations.
var CAPIAgentSettingsVariables = []string{"fleetHostNetwork", "fleetAgentTolerations"}

// capiAgentSettingsChanged is a CEL expression telling whether a request
// sets, changes or removes an annotation or variable of the agent settings.
func capiAgentSettingsChanged() string {
	var changed []string
	for _, a := range CAPIAgentSettingsAnnotations {
		has := func(obj string) string {
			return fmt.Sprintf("(%[1]s != null && has(%[1]s.metadata.annotations) && '%[2]s' in %[1]s.metadata.annotations)", obj, a)
		}
		changed = append(changed, fmt.Sprintf("%[1]s != %[2]s || (%[1]s && object.metadata.annotations['%[3]s'] != oldObject.metadata.annotations['%[3]s'])",
			has("object"), has("oldObject"), a))
	}
	for _, v := range CAPIAgentSettingsVariables {
		value := func(obj string) string {
			return fmt.Sprintf("((%[1]s != null && has(%[1]s.spec) && has(%[1]s.spec.topology) && has(%[1]s.spec.topology.variables)) ? %[1]s.spec.topology.variables.filter(v, v.name == '%[2]s') : [])",
				obj, v)
		}
		changed = append(changed, value("object")+" != "+value("oldObject"))
	}
	return strings.Join(changed, " || ")
}

// capiAgentSettingsPolicy refuses a Cluster API Cluster created with agent
// settings annotations or variables, or updated with other ones, by a user
// the authorizer does not allow ConfigureAgentVerb on the fleet Cluster
// that cluster is enrolled as (same namespace and name). Cluster API's own
// controllers never trip it: they do not change these. The policy may be
// installed before Cluster API: it applies once the resource exists.
func capiAgentSettingsPolicy() *admissionv1.ValidatingAdmissionPolicy {
	fail := admissionv1.Fail
	return &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: CAPIAgentSettingsPolicyName, Labels: map[string]string{"app": ManagerName}},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule: admissionv1.Rule{APIGroups: []string{"cluster.x-k8s.io"}, APIVersions: []string{"*"},
						Resources: []string{"clusters"}},
				},
			}}},
			Variables: []admissionv1.Variable{{
				Name:       "agentSettingsChanged",
				Expression: capiAgentSettingsChanged(),
			}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("!variables.agentSettingsChanged || authorizer.group('%s').resource('clusters').namespace(object.metadata.namespace).name(object.metadata.name).check('%s').allowed()",
					fleet.GroupVersion.Group, ConfigureAgentVerb),
				Message: fmt.Sprintf("the annotations %s and the ClusterClass variables %s of a Cluster API Cluster become its fleet Cluster's agent settings, which administer the cluster: setting them needs verb %q on clusters.%s, which writing Cluster API Clusters does not give",
					strings.Join(CAPIAgentSettingsAnnotations, ", "), strings.Join(CAPIAgentSettingsVariables, ", "), ConfigureAgentVerb, fleet.GroupVersion.Group),
				Reason: ptrTo(metav1.StatusReasonForbidden),
			}},
		},
	}
}
