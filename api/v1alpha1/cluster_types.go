package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func init() {
	register(&Cluster{}, &ClusterList{})
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=fleet
// +kubebuilder:printcolumn:name="Bundles-Ready",type=string,JSONPath=`.status.display.readyBundles`
// +kubebuilder:printcolumn:name="Last-Seen",type=date,JSONPath=`.status.agent.lastSeen`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Cluster is a downstream cluster running a fleet agent. It is created by
// agent registration (with a ClusterRegistrationToken) or by the user with a
// kubeconfig secret, in which case the manager deploys the agent itself. Its
// labels are what targets select on.
type Cluster struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec configures the agent and how the cluster is reached.
	Spec ClusterSpec `json:"spec,omitempty"`
	// Status is the agent's check-in and the state of the cluster's bundles.
	Status ClusterStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ClusterList is a list of Clusters.
type ClusterList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the Clusters.
	Items []Cluster `json:"items"`
}

// ClusterSpec configures the agent and how the cluster is reached.
type ClusterSpec struct {
	// Paused stops new deployments to this cluster.
	Paused bool `json:"paused,omitempty"`
	// ClientID identifies the downstream cluster across registrations; by
	// default the UID of its kube-system namespace.
	ClientID string `json:"clientID,omitempty"`
	// KubeConfigSecret names a Secret in the Cluster's namespace (or
	// KubeConfigSecretNamespace) holding a kubeconfig under key "value". Set,
	// it makes the manager deploy the agent (manager-initiated registration).
	KubeConfigSecret string `json:"kubeConfigSecret,omitempty"`
	// KubeConfigSecretNamespace is the namespace of KubeConfigSecret when it
	// is not the Cluster's. The manager reads it only when that namespace is
	// in its --kubeconfig-secret-namespaces flag (default: none).
	KubeConfigSecretNamespace string `json:"kubeConfigSecretNamespace,omitempty"`
	// RedeployAgentGeneration redeploys the agent when bumped.
	RedeployAgentGeneration int64 `json:"redeployAgentGeneration,omitempty"`
	// AgentEnvVars are extra environment variables of the agent.
	AgentEnvVars []corev1.EnvVar `json:"agentEnvVars,omitempty"`
	// AgentNamespace is the downstream namespace of the agent; defaults to the
	// system namespace.
	AgentNamespace string `json:"agentNamespace,omitempty"`
	// PrivateRepoURL is a registry prefix for the agent image.
	PrivateRepoURL string `json:"privateRepoURL,omitempty"`
	// TemplateValues are available to Helm values templates as .ClusterValues.
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	TemplateValues *GenericMap `json:"templateValues,omitempty"`
	// AgentTolerations are extra tolerations of the agent.
	AgentTolerations []corev1.Toleration `json:"agentTolerations,omitempty"`
	// AgentAffinity replaces the agent's default affinity.
	AgentAffinity *corev1.Affinity `json:"agentAffinity,omitempty"`
	// AgentResources are the agent's resource requests and limits.
	AgentResources *corev1.ResourceRequirements `json:"agentResources,omitempty"`
	// HostNetwork runs the agent in the host network, for clusters without a
	// working pod network yet.
	HostNetwork *bool `json:"hostNetwork,omitempty"`
	// AgentSchedulingCustomization gives the agent a PriorityClass and a
	// PodDisruptionBudget, created with the agent and removed with it (or
	// when unset again).
	// +optional
	AgentSchedulingCustomization *AgentSchedulingCustomization `json:"agentSchedulingCustomization,omitempty"`
	// AgentPullSecrets name Secrets of the agent's namespace downstream that
	// its image is pulled with, instead of the manager's
	// --agent-image-pull-secrets; they must exist there already: unlike the
	// manager's, they are not copied (as in Fleet).
	// +optional
	AgentPullSecrets *[]corev1.LocalObjectReference `json:"agentPullSecrets,omitempty"`
}

// AgentSchedulingCustomization is the PriorityClass and PodDisruptionBudget
// of a Cluster's agent (Fleet's names).
type AgentSchedulingCustomization struct {
	// PriorityClass, set, creates the cluster-scoped PriorityClass
	// fleet-agent-priority-class downstream and runs the agent with it.
	// +optional
	PriorityClass *PriorityClassSpec `json:"priorityClass,omitempty"`
	// PodDisruptionBudget, set, creates the PodDisruptionBudget
	// fleet-agent-pod-disruption-budget for the agent's pods.
	// +optional
	PodDisruptionBudget *PodDisruptionBudgetSpec `json:"podDisruptionBudget,omitempty"`
}

// PriorityClassSpec is the agent's PriorityClass.
type PriorityClassSpec struct {
	// Value is the priority of the agent's pods.
	// +kubebuilder:validation:Maximum=1000000000
	// +kubebuilder:validation:Minimum=-1000000000
	// +optional
	Value int `json:"value,omitempty"`
	// PreemptionPolicy is Never or PreemptLowerPriority (the default).
	// +optional
	PreemptionPolicy *corev1.PreemptionPolicy `json:"preemptionPolicy,omitempty"`
}

// PodDisruptionBudgetSpec is the agent's PodDisruptionBudget: at most one
// of the two, a number or a percentage; neither means maxUnavailable 0.
// +kubebuilder:validation:XValidation:rule="!(has(self.minAvailable) && size(self.minAvailable) > 0 && has(self.maxUnavailable) && size(self.maxUnavailable) > 0)",message="set minAvailable or maxUnavailable, not both"
type PodDisruptionBudgetSpec struct {
	// MinAvailable is a number ("1") or a percentage ("50%").
	// +kubebuilder:validation:Pattern=`^([0-9]+%?)?$`
	// +optional
	MinAvailable string `json:"minAvailable,omitempty"`
	// MaxUnavailable is a number ("1") or a percentage ("50%").
	// +kubebuilder:validation:Pattern=`^([0-9]+%?)?$`
	// +optional
	MaxUnavailable string `json:"maxUnavailable,omitempty"`
}

// ClusterStatus is the agent's check-in and the state of the cluster's
// bundles.
type ClusterStatus struct {
	// Conditions: Ready, Processed, Imported.
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Namespace is the cluster namespace holding this cluster's
	// BundleDeployments.
	Namespace string `json:"namespace,omitempty"`
	// Summary counts the cluster's BundleDeployments by state.
	Summary BundleSummary `json:"summary,omitempty"`
	// ResourceCounts counts the cluster's deployed resources by state.
	ResourceCounts ResourceCounts `json:"resourceCounts,omitempty"`
	// ReadyGitRepos is the number of GitRepos targeting this cluster whose
	// bundles are all ready here.
	ReadyGitRepos int `json:"readyGitRepos,omitempty"`
	// DesiredReadyGitRepos is the number of GitRepos targeting this cluster.
	DesiredReadyGitRepos int `json:"desiredReadyGitRepos,omitempty"`
	// ReadyHelmOps is the number of HelmOps targeting this cluster whose
	// bundles are all ready here.
	ReadyHelmOps int `json:"readyHelmOps,omitempty"`
	// DesiredReadyHelmOps is the number of HelmOps targeting this cluster.
	DesiredReadyHelmOps int `json:"desiredReadyHelmOps,omitempty"`
	// AgentDeployedGeneration is the redeployAgentGeneration the agent was
	// last deployed for.
	AgentDeployedGeneration *int64 `json:"agentDeployedGeneration,omitempty"`
	// Display holds the values shown by kubectl.
	Display ClusterDisplay `json:"display,omitempty"`
	// Agent is the agent's last check-in.
	Agent AgentStatus `json:"agent,omitempty"`
	// APIServerURL is the manager API server URL the agent was deployed with.
	APIServerURL string `json:"apiServerURL,omitempty"`
	// APIServerCAHash is a hash of the manager CA the agent was deployed with,
	// to tell when the agent must be redeployed.
	APIServerCAHash string `json:"apiServerCAHash,omitempty"`
	// Scheduled is true while a Schedule targets this cluster: it then
	// takes new deployments only while ActiveSchedule is true (written by
	// the Schedule controller, as Fleet's).
	Scheduled bool `json:"scheduled,omitempty"`
	// ActiveSchedule is true while one of the cluster's Schedules has its
	// window open.
	ActiveSchedule bool `json:"activeSchedule,omitempty"`
	// AgentTLSMode is the TLS mode (strict or system-store) the agent was
	// last deployed with.
	AgentTLSMode string `json:"agentTLSMode,omitempty"`
	// GarbageCollectionInterval is the interval of the agent's collection of
	// obsolete Helm releases it was last deployed with.
	GarbageCollectionInterval *metav1.Duration `json:"garbageCollectionInterval,omitempty"`
}

// ClusterDisplay holds the Cluster values shown by kubectl.
type ClusterDisplay struct {
	// ReadyBundles is "ready/desired", e.g. "3/3".
	ReadyBundles string `json:"readyBundles,omitempty"`
	// State is the worst state over the cluster's BundleDeployments, or
	// WaitCheckIn before the agent's first check-in.
	State string `json:"state,omitempty"`
}

// AgentStatus is the agent's last check-in.
type AgentStatus struct {
	// LastSeen is when the agent last checked in, as far as the manager
	// shows it: agents check in by renewing their Lease
	// (fleet-agent-checkin in the cluster namespace), and the manager copies
	// its renew time here only when something shown changes (the first
	// check-in, an Offline cluster back, the agent's namespace) or when this
	// is an hour old.
	LastSeen metav1.Time `json:"lastSeen,omitempty"`
	// Namespace is the downstream namespace the agent runs in.
	Namespace string `json:"namespace,omitempty"`
	// RenewalHash is the hex SHA-256 of the clientRandom of a registration
	// the agent is about to make, written with its current credential by
	// agents of the layout before check-in Leases (agents now write it as
	// an annotation of their Lease); it
	// proves that the new registration comes from the agent that holds the
	// Cluster, which the manager then lets replace its credential.
	RenewalHash string `json:"renewalHash,omitempty"`
}
