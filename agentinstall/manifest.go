package agentinstall

import (
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/agentmanifest"
)

// What an installation is made of, rendered by internal/agentmanifest (which
// the manager's own install shares): the names below are agentmanifest's.

// DefaultImage is the agent image used when none is given.
const DefaultImage = agentmanifest.DefaultImage

// Keys of the fleet-agent-bootstrap Secret.
const (
	BootstrapAPIServerURLKey                = agentmanifest.BootstrapAPIServerURLKey
	BootstrapAPIServerCAKey                 = agentmanifest.BootstrapAPIServerCAKey
	BootstrapTokenKey                       = agentmanifest.BootstrapTokenKey
	BootstrapClusterNamespaceKey            = agentmanifest.BootstrapClusterNamespaceKey
	BootstrapSystemRegistrationNamespaceKey = agentmanifest.BootstrapSystemRegistrationNamespaceKey
	BootstrapTokenNameKey                   = agentmanifest.BootstrapTokenNameKey
)

// ConfigKey is the key of the fleet-agent ConfigMap that holds AgentConfig.
const ConfigKey = agentmanifest.ConfigKey

// ManagedByLabel marks what the installer created downstream.
const ManagedByLabel = agentmanifest.ManagedByLabel

// Bootstrap is what an agent needs to register (agentmanifest.Bootstrap).
type Bootstrap = agentmanifest.Bootstrap

// AgentConfig is what a cluster says about itself when it registers
// (agentmanifest.AgentConfig).
type AgentConfig = agentmanifest.AgentConfig

// Options describe one agent installation (agentmanifest.Options).
type Options = agentmanifest.Options

// Objects renders the objects of an installation, in the order they should be
// applied (namespace first, Deployment last).
func Objects(o Options) ([]client.Object, error) { return agentmanifest.Objects(o) }

// SchedulingObjects renders the agent's PriorityClass and
// PodDisruptionBudget, those o.Scheduling asks for.
func SchedulingObjects(o Options) ([]client.Object, error) { return agentmanifest.SchedulingObjects(o) }

// Deployment renders the agent Deployment alone, as Objects renders it.
func Deployment(o Options) *appsv1.Deployment { return agentmanifest.Deployment(o) }

// ClusterOptions are the agent settings of a Cluster's spec.
func ClusterOptions(spec *fleet.ClusterSpec) Options { return agentmanifest.ClusterOptions(spec) }

// PullSecrets are the Secrets a Cluster's agent image is pulled with, and
// whether the install copies them (see agentmanifest.PullSecrets).
func PullSecrets(spec *fleet.ClusterSpec, defaults []string) ([]string, bool) {
	return agentmanifest.PullSecrets(spec, defaults)
}

// DefaultResources returns the agent container's default requests and
// limits.
func DefaultResources() corev1.ResourceRequirements { return agentmanifest.DefaultResources() }

// GoMemLimit is the GOMEMLIMIT for a container with these resources.
func GoMemLimit(r corev1.ResourceRequirements) string { return agentmanifest.GoMemLimit(r) }

// YAML renders objects as one multi-document stream.
func YAML(objs []client.Object) ([]byte, error) { return agentmanifest.YAML(objs) }

// ReadBootstrap reads a fleet-agent-bootstrap Secret as the agent sees it.
func ReadBootstrap(s *corev1.Secret) (*Bootstrap, error) { return agentmanifest.ReadBootstrap(s) }

// ReadConfig reads the fleet-agent ConfigMap; nil gives an empty config.
func ReadConfig(cm *corev1.ConfigMap) (*AgentConfig, error) { return agentmanifest.ReadConfig(cm) }
