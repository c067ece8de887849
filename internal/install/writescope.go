package install

import (
	"fmt"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/agentmanifest"
	"github.com/gitfleet/fleet/internal/names"
)

// WriteScopePolicyName names the admission policy that keeps the manager's
// writes of Secrets, ConfigMaps and Deployments where it makes them.
const WriteScopePolicyName = "fleet-manager-write-scope"

// writeScopePolicy confines the manager's ServiceAccount where RBAC cannot,
// because the manager writes into namespaces made at run time:
//
//   - no Secret of type kubernetes.io/service-account-token, and no
//     kubernetes.io/service-account.* annotation on any Secret: the token
//     controller fills such a Secret with a long-lived token of the
//     ServiceAccount it names (fleet-agent is cluster-admin);
//   - Secrets only in cluster namespaces (labelled fleet.cattle.io/managed,
//     which the manager sets only on namespaces it creates), the
//     registration namespace, the local agent's bootstrap Secret, the local
//     Cluster's Secret, and a registration token's values Secret, shaped as
//     the manager makes it, over nothing fleet did not make;
//   - ConfigMaps only in cluster namespaces and the local agent's own;
//   - the local agent's Deployment only as the manager renders it: the
//     fleet-agent ServiceAccount, one container running agentImage with the
//     agent's own arguments, nothing else that runs code.
func writeScopePolicy(ns, agentImage string) (*admissionv1.ValidatingAdmissionPolicy, error) {
	args, err := agentArgs()
	if err != nil {
		return nil, err
	}
	fail := admissionv1.Fail
	rule := func(group, resource string) admissionv1.NamedRuleWithOperations {
		return admissionv1.NamedRuleWithOperations{RuleWithOperations: admissionv1.RuleWithOperations{
			Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
			Rule:       admissionv1.Rule{APIGroups: []string{group}, APIVersions: []string{"v1"}, Resources: []string{resource}},
		}}
	}
	return &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: WriteScopePolicyName, Labels: map[string]string{"app": ManagerName}},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{
				rule("", "secrets"), rule("", "configmaps"), rule("apps", "deployments"),
			}},
			MatchConditions: []admissionv1.MatchCondition{{
				Name:       "fleet-manager",
				Expression: fmt.Sprintf("request.userInfo.username == 'system:serviceaccount:%s:%s'", ns, ManagerName),
			}},
			Variables: []admissionv1.Variable{
				{Name: "clusterNamespace", Expression: managedCEL("namespaceObject")},
				{Name: "tokenValues", Expression: tokenValuesCEL()},
				{Name: "localAgent", Expression: localAgentCEL(agentImage, args)},
			},
			Validations: writeScopeValidations(ns),
		},
	}, nil
}

func writeScopeValidations(ns string) []admissionv1.Validation {
	regNS := names.SystemRegistrationNamespace(ns)
	is := func(resource string) string { return fmt.Sprintf("request.resource.resource != '%s' || ", resource) }
	return []admissionv1.Validation{{
		Expression: is("secrets") + fmt.Sprintf("!has(object.type) || object.type != '%s'", corev1.SecretTypeServiceAccountToken),
		Message: fmt.Sprintf("the fleet manager never writes a Secret of type %s: the token controller would fill it with a token of the ServiceAccount it names",
			corev1.SecretTypeServiceAccountToken),
		Reason: ptrTo(metav1.StatusReasonForbidden),
	}, {
		Expression: is("secrets") + "!has(object.metadata.annotations) || !object.metadata.annotations.exists(k, k.startsWith('kubernetes.io/service-account.'))",
		Message:    "the fleet manager never sets a kubernetes.io/service-account.* annotation on a Secret: it asks the token controller for a ServiceAccount's token",
		Reason:     ptrTo(metav1.StatusReasonForbidden),
	}, {
		Expression: is("secrets") + fmt.Sprintf("variables.clusterNamespace || request.namespace == '%s' || (request.namespace == '%s' && object.metadata.name == '%s') || (request.namespace == '%s' && object.metadata.name == '%s') || variables.tokenValues",
			regNS, ns, fleet.AgentBootstrapSecretName, fleet.LocalWorkspace, fleet.LocalClusterSecretName),
		Message: fmt.Sprintf("the fleet manager writes Secrets only in the cluster namespaces it made (labelled %s=true), in %s, as %s/%s and %s/%s, and a ClusterRegistrationToken's values Secret as it makes them (Opaque, named <token>-token, labelled %s=<token> and %s=true, controlled by that token), over no Secret fleet did not make",
			fleet.ManagedLabel, regNS, ns, fleet.AgentBootstrapSecretName, fleet.LocalWorkspace, fleet.LocalClusterSecretName,
			fleet.RegistrationTokenLabel, fleet.ManagedLabel),
		Reason: ptrTo(metav1.StatusReasonForbidden),
	}, {
		Expression: is("configmaps") + fmt.Sprintf("variables.clusterNamespace || (request.namespace == '%s' && object.metadata.name == '%s')", ns, fleet.AgentName),
		Message: fmt.Sprintf("the fleet manager writes ConfigMaps only in the cluster namespaces it made (labelled %s=true) and its local agent's %s/%s",
			fleet.ManagedLabel, ns, fleet.AgentName),
		Reason: ptrTo(metav1.StatusReasonForbidden),
	}, {
		Expression: is("deployments") + fmt.Sprintf("request.namespace == '%s' && object.metadata.name == '%s' && variables.localAgent", ns, fleet.AgentName),
		Message: fmt.Sprintf("the fleet manager writes only its local agent's Deployment %s/%s, as it renders it: ServiceAccount %s, one container \"agent\" running the installed agent image with the agent's own arguments, no command, hooks, probes, init or ephemeral containers, only emptyDir volumes",
			ns, fleet.AgentName, fleet.AgentName),
		Reason: ptrTo(metav1.StatusReasonForbidden),
	}}
}

// managedCEL tells, in CEL, whether obj carries fleet.cattle.io/managed=true.
func managedCEL(obj string) string {
	return fmt.Sprintf("(%[1]s != null && has(%[1]s.metadata.labels) && '%[2]s' in %[1]s.metadata.labels && %[1]s.metadata.labels['%[2]s'] == 'true')",
		obj, fleet.ManagedLabel)
}

// tokenValuesCEL tells whether a Secret is shaped as the values Secret the
// manager writes for a ClusterRegistrationToken in the token's namespace
// (any namespace: tokens are made where their Clusters live), and, on an
// update, was one already.
func tokenValuesCEL() string {
	token := func(obj string) string {
		return fmt.Sprintf("(has(%[1]s.metadata.labels) && '%[2]s' in %[1]s.metadata.labels)", obj, fleet.RegistrationTokenLabel)
	}
	label := fmt.Sprintf("object.metadata.labels['%s']", fleet.RegistrationTokenLabel)
	return strings.Join([]string{
		managedCEL("object"), token("object"),
		fmt.Sprintf("object.metadata.name == %s + '-token'", label),
		fmt.Sprintf("has(object.type) && object.type == '%s'", corev1.SecretTypeOpaque),
		fmt.Sprintf("has(object.metadata.ownerReferences) && object.metadata.ownerReferences.exists(r, r.apiVersion == '%s' && r.kind == 'ClusterRegistrationToken' && r.name == %s && has(r.controller) && r.controller)",
			fleet.GroupVersion.String(), label),
		fmt.Sprintf("(oldObject == null || (%s && %s && oldObject.metadata.labels['%s'] == %s))",
			managedCEL("oldObject"), token("oldObject"), fleet.RegistrationTokenLabel, label),
	}, " && ")
}

// localAgentCEL tells whether a Deployment runs what the manager renders
// for the local agent (agentmanifest.Objects): the settings an admin may
// give the local Cluster (environment, placement, resources) vary, what
// the code run as fleet-agent is does not.
func localAgentCEL(image string, agentArgs []string) string {
	pod := "object.spec.template.spec"
	none := func(field string) string {
		return fmt.Sprintf("(!has(%[1]s.%[2]s) || size(%[1]s.%[2]s) == 0)", pod, field)
	}
	args := make([]string, 0, len(agentArgs))
	for _, a := range agentArgs {
		args = append(args, "'"+a+"'")
	}
	return strings.Join([]string{
		fmt.Sprintf("has(%[1]s.serviceAccountName) && %[1]s.serviceAccountName == '%[2]s'", pod, fleet.AgentName),
		fmt.Sprintf("(!has(%[1]s.serviceAccount) || %[1]s.serviceAccount == '%[2]s')", pod, fleet.AgentName),
		none("initContainers"), none("ephemeralContainers"),
		fmt.Sprintf("size(%s.containers) == 1", pod),
		fmt.Sprintf("%s.containers.all(c, c.name == 'agent' && %s && !has(c.command) && has(c.args) && c.args == [%s] && !has(c.lifecycle) && !has(c.livenessProbe) && !has(c.readinessProbe) && !has(c.startupProbe))",
			pod, agentImageCEL("c.image", image), strings.Join(args, ", ")),
		fmt.Sprintf("(!has(%[1]s.volumes) || %[1]s.volumes.all(v, has(v.emptyDir)))", pod),
	}, " && ")
}

// agentImageCEL tells whether field names the installed agent image or
// another tag or digest of its repository: during an agent upgrade the
// local cluster's agent Bundle still names the image it runs, so a repair
// of the local agent installs that one, while the install names the next.
func agentImageCEL(field, image string) string {
	repo := imageRepository(image)
	return fmt.Sprintf("(%[1]s == '%[2]s' || %[1]s.startsWith('%[3]s:') || %[1]s.startsWith('%[3]s@'))", field, image, repo)
}

// imageRepository is an image reference without its tag or digest.
func imageRepository(image string) string {
	if i := strings.Index(image, "@"); i >= 0 {
		image = image[:i]
	}
	if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		image = image[:i]
	}
	return image
}

// agentArgs are the arguments of the agent's container as agentinstall
// renders them.
func agentArgs() ([]string, error) {
	objs, err := agentmanifest.Objects(agentmanifest.Options{})
	if err != nil {
		return nil, fmt.Errorf("rendering the agent's Deployment: %w", err)
	}
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok && len(d.Spec.Template.Spec.Containers) == 1 {
			return d.Spec.Template.Spec.Containers[0].Args, nil
		}
	}
	return nil, fmt.Errorf("the agent renders no Deployment with one container")
}
