package capi

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/yaml"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// What the fleet Cluster takes from its Cluster API Cluster besides labels:
// the agent's bootstrap settings and the facts Helm values can template.
const (
	// ClusterClassNamespaceLabel on a fleet Cluster names the namespace of
	// its ClusterClass (the Cluster API Cluster's own when classRef has
	// none, as Cluster API defaults it).
	ClusterClassNamespaceLabel = "fleet.cattle.io/cluster-class-namespace"
	// HostNetworkAnnotation ("true" or "false") on a Cluster API Cluster
	// sets the fleet Cluster's spec.hostNetwork: the agent runs in the host
	// network, so it works before a CNI is installed.
	HostNetworkAnnotation = "fleet.cattle.io/host-network"
	// AgentTolerationsAnnotation on a Cluster API Cluster sets the fleet
	// Cluster's spec.agentTolerations: a JSON or YAML list of tolerations,
	// or "bootstrap" for BootstrapTolerations.
	AgentTolerationsAnnotation = "fleet.cattle.io/agent-tolerations"
	// HostNetworkVariable and AgentTolerationsVariable are the ClusterClass
	// variables (spec.topology.variables) that say the same; the
	// annotations win over them.
	HostNetworkVariable      = "fleetHostNetwork"
	AgentTolerationsVariable = "fleetAgentTolerations"
	// BootstrapTolerationsValue asks for BootstrapTolerations.
	BootstrapTolerationsValue = "bootstrap"
	// TemplateValuesKey is the key of spec.templateValues under which the
	// Cluster API facts are kept (see TemplateFacts); Helm values read them
	// as ${ .ClusterValues.ClusterAPI.kubernetesVersion }. Other keys of
	// spec.templateValues are left alone.
	TemplateValuesKey = "ClusterAPI"
)

// BootstrapTolerations let the agent be scheduled on a cluster that has no
// CNI and no cloud provider yet, and on control-plane nodes: the taints a
// fresh Cluster API cluster has until its add-ons are installed, which may
// be what the agent is to install.
func BootstrapTolerations() []corev1.Toleration {
	return []corev1.Toleration{
		{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.cloudprovider.kubernetes.io/uninitialized", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.cluster.x-k8s.io/uninitialized", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		{Key: "node-role.kubernetes.io/control-plane", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
	}
}

// AgentSettings are the agent settings a Cluster API Cluster asks for; nil
// fields are not asked for, and leave the fleet Cluster's as they are.
type AgentSettings struct {
	HostNetwork *bool
	Tolerations []corev1.Toleration
	// TolerationsSet tells an explicit empty list from none.
	TolerationsSet bool
}

// DesiredAgentSettings reads the agent settings from the Cluster API
// Cluster's annotations, else from its ClusterClass variables. A value that
// does not parse is an error that names where it came from.
func DesiredAgentSettings(c *clusterv1.Cluster) (AgentSettings, error) {
	var s AgentSettings
	vars := map[string][]byte{}
	for _, v := range c.Spec.Topology.Variables {
		vars[v.Name] = v.Value.Raw
	}
	if v, ok := c.Annotations[HostNetworkAnnotation]; ok {
		b, err := strconv.ParseBool(strings.TrimSpace(v))
		if err != nil {
			return s, fmt.Errorf("annotation %s: %q is not true or false", HostNetworkAnnotation, v)
		}
		s.HostNetwork = &b
	} else if raw, ok := vars[HostNetworkVariable]; ok {
		var b bool
		if err := json.Unmarshal(raw, &b); err != nil {
			return s, fmt.Errorf("ClusterClass variable %s: %s is not a boolean", HostNetworkVariable, raw)
		}
		s.HostNetwork = &b
	}
	if v, ok := c.Annotations[AgentTolerationsAnnotation]; ok {
		t, err := parseTolerations([]byte(v))
		if err != nil {
			return s, fmt.Errorf("annotation %s: %w", AgentTolerationsAnnotation, err)
		}
		s.Tolerations, s.TolerationsSet = t, true
	} else if raw, ok := vars[AgentTolerationsVariable]; ok {
		t, err := parseTolerations(raw)
		if err != nil {
			return s, fmt.Errorf("ClusterClass variable %s: %w", AgentTolerationsVariable, err)
		}
		s.Tolerations, s.TolerationsSet = t, true
	}
	return s, nil
}

// parseTolerations reads "bootstrap" (bare, or as a JSON string) or a list
// of tolerations in JSON or YAML, checked as the API server would.
func parseTolerations(raw []byte) ([]corev1.Toleration, error) {
	v := strings.TrimSpace(string(raw))
	if v == BootstrapTolerationsValue || v == strconv.Quote(BootstrapTolerationsValue) {
		return BootstrapTolerations(), nil
	}
	var out []corev1.Toleration
	if err := yaml.UnmarshalStrict([]byte(v), &out); err != nil {
		return nil, fmt.Errorf("neither %q nor a list of tolerations: %w", BootstrapTolerationsValue, err)
	}
	for i, t := range out {
		if t.Key != "" {
			if msgs := validation.IsQualifiedName(t.Key); len(msgs) > 0 {
				return nil, fmt.Errorf("toleration %d: key %q: %s", i, t.Key, strings.Join(msgs, "; "))
			}
		}
		switch t.Operator {
		case "", corev1.TolerationOpEqual, corev1.TolerationOpExists:
		default:
			return nil, fmt.Errorf("toleration %d: operator %q is not Equal or Exists", i, t.Operator)
		}
		if t.Operator == corev1.TolerationOpExists && t.Value != "" {
			return nil, fmt.Errorf("toleration %d: operator Exists takes no value", i)
		}
		switch t.Effect {
		case "", corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return nil, fmt.Errorf("toleration %d: effect %q is not NoSchedule, PreferNoSchedule or NoExecute", i, t.Effect)
		}
	}
	if out == nil {
		out = []corev1.Toleration{}
	}
	return out, nil
}

// TemplateFacts are the Cluster API facts Helm values can template, kept in
// the fleet Cluster's spec.templateValues under TemplateValuesKey:
// clusterName, namespace, class and classNamespace (with a ClusterClass),
// kubernetesVersion (spec.topology.version) and variables (the topology
// variables by name, their values as Cluster API holds them).
func TemplateFacts(c *clusterv1.Cluster) map[string]interface{} {
	facts := map[string]interface{}{
		"clusterName": c.Name,
		"namespace":   c.Namespace,
	}
	if class := c.Spec.Topology.ClassRef.Name; class != "" {
		facts["class"] = class
		facts["classNamespace"] = classNamespace(c)
	}
	if v := c.Spec.Topology.Version; v != "" {
		facts["kubernetesVersion"] = v
	}
	if len(c.Spec.Topology.Variables) > 0 {
		vars := map[string]interface{}{}
		for _, v := range c.Spec.Topology.Variables {
			var val interface{}
			if len(v.Value.Raw) > 0 && json.Unmarshal(v.Value.Raw, &val) != nil {
				val = string(v.Value.Raw)
			}
			vars[v.Name] = val
		}
		facts["variables"] = vars
	}
	return facts
}

// WithTemplateFacts returns the fleet Cluster's templateValues with the
// Cluster API facts under TemplateValuesKey and its other keys as they were.
func WithTemplateFacts(current *fleet.GenericMap, facts map[string]interface{}) *fleet.GenericMap {
	data := map[string]interface{}{}
	if current != nil {
		for k, v := range current.Data {
			data[k] = v
		}
	}
	data[TemplateValuesKey] = facts
	return &fleet.GenericMap{Data: data}
}

func classNamespace(c *clusterv1.Cluster) string {
	if ns := c.Spec.Topology.ClassRef.Namespace; ns != "" {
		return ns
	}
	return c.Namespace
}

// reservedLabel tells whether a label key belongs to Cluster API or fleet
// (cluster.x-k8s.io, fleet.cattle.io and their subdomains): such labels say
// something about the Cluster API object, or would steer fleet, and are not
// copied to the fleet Cluster.
func reservedLabel(key string) bool {
	prefix, _, ok := strings.Cut(key, "/")
	if !ok {
		return false
	}
	for _, domain := range []string{"cluster.x-k8s.io", "fleet.cattle.io"} {
		if prefix == domain || strings.HasSuffix(prefix, "."+domain) {
			return true
		}
	}
	return false
}
