// Package install renders the manifests that install the manager: the CRDs, its
// namespace, a least-privilege ClusterRole, the known-hosts ConfigMap (SSH
// host keys of the well-known git hosts), and a Deployment with leader
// election, metrics and health probes. `fleet install controller` prints them;
// config/ holds the same objects as kustomize bases.
package install

import (
	"fmt"
	"strings"

	"bytes"
	admissionv1 "k8s.io/api/admissionregistration/v1"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/config/crd"
	"github.com/gitfleet/fleet/config/knownhosts"
	"github.com/gitfleet/fleet/config/rbac"
	"github.com/gitfleet/fleet/internal/agentmanifest"
	"github.com/gitfleet/fleet/internal/gitfetch"
	"github.com/gitfleet/fleet/internal/names"
)

// DefaultControllerImage is the manager image used when none is given: the
// name `make images` gives the manager's image layout (and the Helm chart's
// default image).
const DefaultControllerImage = "ghcr.io/gitfleet/fleet-manager:latest"

// ManagerName names the manager's Deployment, ServiceAccount and RBAC.
const ManagerName = "fleet-manager"

// GitCacheSizeLimit is the size limit of the manager's git cache volume: the
// last line behind the manager's git limits, past which the kubelet evicts
// the pod.
const GitCacheSizeLimit = "8Gi"

// ControllerOptions configure the manager installation.
type ControllerOptions struct {
	CRDsOnly        bool
	ControllerImage string
	AgentImage      string
	SystemNamespace string
	// ImagePullSecrets name Secrets of SystemNamespace that pull the
	// manager's image and, copied into each agent's namespace, the agent's
	// (--agent-image-pull-secrets).
	ImagePullSecrets []string
}

// ControllerYAML renders the manager's manifests as one YAML stream.
func ControllerYAML(o ControllerOptions) ([]byte, error) {
	docs, err := crd.Manifests()
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	for _, d := range docs {
		buf.WriteString("---\n")
		buf.Write(bytes.TrimPrefix(d, []byte("---\n")))
		buf.WriteString("\n")
	}
	if o.CRDsOnly {
		return buf.Bytes(), nil
	}
	controller, err := ControllerObjects(o)
	if err != nil {
		return nil, err
	}
	objs, err := agentmanifest.YAML(controller)
	if err != nil {
		return nil, err
	}
	buf.Write(objs)
	return buf.Bytes(), nil
}

// ControllerObjects are the manager's namespaced and cluster objects.
func ControllerObjects(o ControllerOptions) ([]client.Object, error) {
	objs, err := controllerObjects(o)
	if err != nil || len(o.ImagePullSecrets) == 0 {
		return objs, err
	}
	for _, obj := range objs {
		if dep, ok := obj.(*appsv1.Deployment); ok {
			withPullSecrets(dep, o.ImagePullSecrets)
		}
	}
	return objs, nil
}

func controllerObjects(o ControllerOptions) ([]client.Object, error) {
	rules, err := rbac.ManagerRules()
	if err != nil {
		return nil, err
	}
	ns := o.SystemNamespace
	if ns == "" {
		ns = fleet.DefaultSystemNamespace
	}
	image := o.ControllerImage
	if image == "" {
		image = DefaultControllerImage
	}
	writeScope, err := writeScopePolicy(ns, firstNonEmpty(o.AgentImage, agentmanifest.DefaultImage))
	if err != nil {
		return nil, err
	}
	labels := map[string]string{"app": ManagerName}
	meta := metav1.ObjectMeta{Name: ManagerName, Namespace: ns, Labels: labels}
	objs := []client.Object{
		&corev1.Namespace{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
			ObjectMeta: metav1.ObjectMeta{Name: ns},
		},
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"}, ObjectMeta: meta},
		&rbacv1.ClusterRole{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRole"},
			ObjectMeta: metav1.ObjectMeta{Name: ManagerName, Labels: labels},
			Rules:      rules,
		},
		&rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: ManagerName, Labels: labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ManagerName},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ManagerName, Namespace: ns}},
		},
		tokenScopePolicy(ns),
		policyBinding(TokenScopePolicyName),
		agentSettingsPolicy(),
		policyBinding(AgentSettingsPolicyName),
		writeScope,
		policyBinding(WriteScopePolicyName),
		// The host keys of the well-known git hosts, trusted for SSH
		// repositories whose Secret has no known_hosts, as Fleet ships them.
		&corev1.ConfigMap{
			TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
			ObjectMeta: metav1.ObjectMeta{Name: gitfetch.KnownHostsConfigMap, Namespace: ns, Labels: labels},
			Data:       map[string]string{gitfetch.KnownHostsKey: knownhosts.Data},
		},
	}
	// Agent settings asked for through Cluster API need the same verb as on
	// fleet Clusters; an agent creates no Lease but its check-in.
	objs = append(objs, capiAgentSettingsPolicy(), policyBinding(CAPIAgentSettingsPolicyName),
		agentLeasePolicy(ns), policyBinding(AgentLeasePolicyName))
	objs = append(objs, LocalAgentObjects(ns)...)
	return append(objs,
		&appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: meta,
			Spec: appsv1.DeploymentSpec{
				Replicas: ptr.To[int32](2),
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					// The default shard's manager, labelled as Fleet's chart
					// labels it (Fleet's tooling finds it by these).
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{
						"app": ManagerName, fleet.ShardIDLabel: "", fleet.ShardDefaultLabel: "true"}},
					Spec: corev1.PodSpec{
						ServiceAccountName: ManagerName,
						SecurityContext: &corev1.PodSecurityContext{
							RunAsNonRoot:   ptr.To(true),
							RunAsUser:      ptr.To[int64](65532),
							SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
						},
						Containers: []corev1.Container{{
							Name:  "manager",
							Image: image,
							Args: []string{
								"--leader-elect",
								"--system-namespace=" + ns,
								"--agent-image=" + firstNonEmpty(o.AgentImage, agentmanifest.DefaultImage),
								"--metrics-bind-address=:8080",
								"--health-probe-bind-address=:8081",
								"--webhook-bind-address=:8082",
								"--git-cache-dir=/var/cache/fleet",
							},
							Ports: []corev1.ContainerPort{{Name: "metrics", ContainerPort: 8080}, {Name: "health", ContainerPort: 8081},
								{Name: "webhook", ContainerPort: 8082}},
							LivenessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
								Path: "/healthz", Port: intstr.FromString("health")}}},
							ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
								Path: "/readyz", Port: intstr.FromString("health")}}},
							SecurityContext: &corev1.SecurityContext{
								AllowPrivilegeEscalation: ptr.To(false),
								ReadOnlyRootFilesystem:   ptr.To(true),
								Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							},
							// A limit, so that a runaway (a hostile repository the
							// manager failed to bound) restarts the manager instead
							// of starving its node.
							Resources: corev1.ResourceRequirements{
								Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("256Mi")},
								Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("2Gi")},
							},
							VolumeMounts: []corev1.VolumeMount{{Name: "cache", MountPath: "/var/cache/fleet"}},
						}},
						Volumes: []corev1.Volume{{Name: "cache", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse(GitCacheSizeLimit))}}}},
					},
				},
			},
		},
	), nil
}

// LocalAgentRoleName names the Role that lets the manager install the local
// cluster's agent into its own namespace.
const LocalAgentRoleName = "fleet-manager-local-agent"

// LocalAgentObjects are what the local cluster's agent (installed by the
// manager into the cluster it runs in, as Fleet does) needs beyond what the
// manager writes: its ServiceAccount bound to cluster-admin, made here by
// whoever installs the manager, and a Role that lets the manager write the
// agent's ConfigMap, bootstrap Secret, Deployment and PodDisruptionBudget in
// its own namespace only. So the manager never needs the right to bind
// cluster-admin, which would let a stolen manager credential grant it to
// anyone. Without the ServiceAccount the agent's pods are refused, and its
// Deployment (its agent Bundle's too) is never available.
func LocalAgentObjects(ns string) []client.Object {
	labels := map[string]string{"app": ManagerName}
	agentLabels := map[string]string{agentmanifest.ManagedByLabel: "fleet", "app": fleet.AgentName}
	return []client.Object{
		&corev1.ServiceAccount{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ServiceAccount"},
			ObjectMeta: metav1.ObjectMeta{Name: fleet.AgentName, Namespace: ns, Labels: agentLabels}},
		&rbacv1.ClusterRoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "ClusterRoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: fleet.AgentName + "-" + ns, Labels: agentLabels},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "cluster-admin"},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: fleet.AgentName, Namespace: ns}},
		},
		&rbacv1.Role{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "Role"},
			ObjectMeta: metav1.ObjectMeta{Name: LocalAgentRoleName, Namespace: ns, Labels: labels},
			Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"}, Verbs: []string{"get", "create", "patch"}},
				{APIGroups: []string{"apps"}, Resources: []string{"deployments"}, Verbs: []string{"get", "create", "patch"}},
				// The agent's PodDisruptionBudget (spec.agentSchedulingCustomization).
				{APIGroups: []string{"policy"}, Resources: []string{"poddisruptionbudgets"}, Verbs: []string{"get", "create", "patch", "delete"}},
			},
		},
		&rbacv1.RoleBinding{
			TypeMeta:   metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
			ObjectMeta: metav1.ObjectMeta{Name: LocalAgentRoleName, Namespace: ns, Labels: labels},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: LocalAgentRoleName},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: ManagerName, Namespace: ns}},
		},
	}
}

// withPullSecrets pulls the manager's image with secrets, and has the
// manager copy them into each agent's namespace for the agent's image.
func withPullSecrets(dep *appsv1.Deployment, secrets []string) {
	for _, name := range secrets {
		dep.Spec.Template.Spec.ImagePullSecrets = append(dep.Spec.Template.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: name})
	}
	c := &dep.Spec.Template.Spec.Containers[0]
	c.Args = append(c.Args, "--agent-image-pull-secrets="+strings.Join(secrets, ","))
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// TokenScopePolicyName names the admission policy that keeps the manager
// from minting ServiceAccount tokens where it never needs to.
const TokenScopePolicyName = "fleet-manager-token-scope"

// tokenScopePolicy confines the manager's ServiceAccount where RBAC cannot:
// its ClusterRole grants serviceaccounts/token and namespace deletion
// everywhere, because it works in namespaces made at run time. The policy
// allows the manager to mint tokens only in the system registration
// namespace (registration tokens' ServiceAccounts) and in cluster namespaces
// (agents' ServiceAccounts), and to delete only cluster namespaces. Cluster
// namespaces are the ones labelled fleet.cattle.io/managed=true; the manager
// sets that label only on namespaces it creates (it has no right to change
// an existing namespace), so a stolen manager credential can mint tokens
// only for ServiceAccounts the manager made itself.
func tokenScopePolicy(ns string) *admissionv1.ValidatingAdmissionPolicy {
	fail := admissionv1.Fail
	managed := func(obj string) string {
		return fmt.Sprintf("(%[1]s != null && has(%[1]s.metadata.labels) && '%[2]s' in %[1]s.metadata.labels && %[1]s.metadata.labels['%[2]s'] == 'true')",
			obj, fleet.ManagedLabel)
	}
	regNS := names.SystemRegistrationNamespace(ns)
	return &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: TokenScopePolicyName, Labels: map[string]string{"app": ManagerName}},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create},
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
						Resources: []string{"serviceaccounts/token"}},
				},
			}, {
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Delete},
					Rule: admissionv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"},
						Resources: []string{"namespaces"}},
				},
			}}},
			MatchConditions: []admissionv1.MatchCondition{{
				Name:       "fleet-manager",
				Expression: fmt.Sprintf("request.userInfo.username == 'system:serviceaccount:%s:%s'", ns, ManagerName),
			}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("request.resource.resource != 'serviceaccounts' || request.namespace == '%s' || %s", regNS, managed("namespaceObject")),
				Message: fmt.Sprintf("the fleet manager mints tokens only in %s (registration tokens) and in the cluster namespaces it made (labelled %s=true)",
					regNS, fleet.ManagedLabel),
				Reason: ptrTo(metav1.StatusReasonForbidden),
			}, {
				Expression: "request.resource.resource != 'namespaces' || " + managed("oldObject"),
				Message:    fmt.Sprintf("the fleet manager deletes only the cluster namespaces it made (labelled %s=true)", fleet.ManagedLabel),
				Reason:     ptrTo(metav1.StatusReasonForbidden),
			}},
		},
	}
}

// policyBinding binds the admission policy name to every request it
// matches, denying what it refuses.
func policyBinding(name string) *admissionv1.ValidatingAdmissionPolicyBinding {
	return &admissionv1.ValidatingAdmissionPolicyBinding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicyBinding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": ManagerName}},
		Spec: admissionv1.ValidatingAdmissionPolicyBindingSpec{
			PolicyName:        name,
			ValidationActions: []admissionv1.ValidationAction{admissionv1.Deny},
		},
	}
}

// AgentSettingsPolicyName names the admission policy that lets only those
// allowed to configure a Cluster's agent set its agent settings.
const AgentSettingsPolicyName = "fleet-cluster-agent-settings"

// ConfigureAgentVerb is the RBAC verb on fleet.cattle.io clusters that lets
// a user set a Cluster's agent settings (AgentSettingsFields). Writing a
// Cluster does not: the agent runs with cluster-admin rights on its
// cluster, and those settings choose its image (privateRepoURL), its
// environment (a proxy, say) and where and how it runs, so whoever sets them
// administers that cluster, whatever GitRepoRestriction confines the
// tenant's deployments. Roles granting "*" (cluster-admin) hold the verb.
const ConfigureAgentVerb = "configure-agent"

// AgentSettingsFields are the fields of a Cluster's spec that shape its
// agent's Deployment.
var AgentSettingsFields = []string{"agentEnvVars", "agentNamespace", "privateRepoURL", "agentTolerations", "agentAffinity",
	"agentResources", "hostNetwork", "agentSchedulingCustomization", "agentPullSecrets"}

// agentSettingDefaults is the value each agent setting has when unset, the
// same to the agent: an empty list is no list. Objects have none: set or not.
var agentSettingDefaults = map[string]string{
	"agentEnvVars": "[]", "agentTolerations": "[]", "agentNamespace": "''", "privateRepoURL": "''", "hostNetwork": "false",
}

// agentSettingsChanged is a CEL expression telling whether a request sets,
// changes or removes an agent setting. A missing spec (a Cluster created
// without one, or an update that removes it) has every setting unset.
func agentSettingsChanged() string {
	present := func(obj, f string) string {
		return fmt.Sprintf("(%[1]s != null && has(%[1]s.spec) && has(%[1]s.spec.%[2]s))", obj, f)
	}
	var changed []string
	for _, f := range AgentSettingsFields {
		if d, ok := agentSettingDefaults[f]; ok {
			value := func(obj string) string {
				return fmt.Sprintf("(%s ? %s.spec.%s : %s)", present(obj, f), obj, f, d)
			}
			changed = append(changed, value("object")+" != "+value("oldObject"))
			continue
		}
		changed = append(changed, fmt.Sprintf("%[1]s != %[2]s || (%[1]s && object.spec.%[3]s != oldObject.spec.%[3]s)",
			present("object", f), present("oldObject", f), f))
	}
	return strings.Join(changed, " || ")
}

// agentSettingsPolicy refuses a Cluster created with agent settings, or
// updated with other ones, by a user the authorizer does not allow
// ConfigureAgentVerb on that Cluster.
func agentSettingsPolicy() *admissionv1.ValidatingAdmissionPolicy {
	fail := admissionv1.Fail
	return &admissionv1.ValidatingAdmissionPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: "admissionregistration.k8s.io/v1", Kind: "ValidatingAdmissionPolicy"},
		ObjectMeta: metav1.ObjectMeta{Name: AgentSettingsPolicyName, Labels: map[string]string{"app": ManagerName}},
		Spec: admissionv1.ValidatingAdmissionPolicySpec{
			FailurePolicy: &fail,
			MatchConstraints: &admissionv1.MatchResources{ResourceRules: []admissionv1.NamedRuleWithOperations{{
				RuleWithOperations: admissionv1.RuleWithOperations{
					Operations: []admissionv1.OperationType{admissionv1.Create, admissionv1.Update},
					Rule: admissionv1.Rule{APIGroups: []string{fleet.GroupVersion.Group}, APIVersions: []string{"*"},
						Resources: []string{"clusters"}},
				},
			}}},
			Variables: []admissionv1.Variable{{
				Name:       "agentSettingsChanged",
				Expression: agentSettingsChanged(),
			}},
			Validations: []admissionv1.Validation{{
				Expression: fmt.Sprintf("!variables.agentSettingsChanged || authorizer.group('%s').resource('clusters').namespace(object.metadata.namespace).name(object.metadata.name).check('%s').allowed()",
					fleet.GroupVersion.Group, ConfigureAgentVerb),
				Message: fmt.Sprintf("setting a Cluster's agent settings (spec.%s) administers its cluster: it needs verb %q on clusters.%s, which writing Clusters does not give",
					strings.Join(AgentSettingsFields, ", spec."), ConfigureAgentVerb, fleet.GroupVersion.Group),
				Reason: ptrTo(metav1.StatusReasonForbidden),
			}},
		},
	}
}

func ptrTo[T any](v T) *T { return &v }
