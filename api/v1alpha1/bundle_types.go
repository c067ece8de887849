package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func init() {
	register(&Bundle{}, &BundleList{})
}

// BundleState is the state of one deployment of a bundle to one cluster, or
// the worst such state in a summary.
// +kubebuilder:validation:Enum=Ready;NotReady;WaitApplied;ErrApplied;OutOfSync;Pending;Modified
type BundleState string

// Bundle states, from best to worst as summaries rank them: Ready, NotReady,
// Pending, OutOfSync, Modified, WaitApplied, ErrApplied.
const (
	// Ready: applied, ready and unmodified.
	Ready BundleState = "Ready"
	// NotReady: applied, but some resources are not ready.
	NotReady BundleState = "NotReady"
	// WaitApplied: the agent has not applied the current deploymentID yet.
	WaitApplied BundleState = "WaitApplied"
	// ErrApplied: the agent failed to apply the current deploymentID.
	ErrApplied BundleState = "ErrApplied"
	// OutOfSync: a newer deployment is staged but not yet rolled out.
	OutOfSync BundleState = "OutOfSync"
	// Pending: a target matched but has no BundleDeployment yet.
	Pending BundleState = "Pending"
	// Modified: deployed resources differ from the desired ones.
	Modified BundleState = "Modified"
)

// TargetCustomizationMode says how many matching targets customize the
// options for one cluster.
// +kubebuilder:validation:Enum=FirstMatch;AllMatches
type TargetCustomizationMode string

const (
	// FirstMatch applies the options of the first matching target only.
	FirstMatch TargetCustomizationMode = "FirstMatch"
	// AllMatches applies the options of every matching target, in order.
	AllMatches TargetCustomizationMode = "AllMatches"
)

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=fleet
// +kubebuilder:printcolumn:name="BundleDeployments-Ready",type=string,JSONPath=`.status.display.readyClusters`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Bundle is a set of resources and the options to deploy them, with the
// targets that say which clusters get them. A GitRepo makes one Bundle per
// bundle directory; the manager turns it into one BundleDeployment per
// matching cluster.
type Bundle struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is the desired state of the bundle.
	Spec BundleSpec `json:"spec,omitempty"`
	// Status is the rollout state over the targeted clusters.
	Status BundleStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// BundleList is a list of Bundles.
type BundleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the Bundles.
	Items []Bundle `json:"items"`
}

// BundleSpec is the desired state of a Bundle: default deployment options
// (the body of fleet.yaml), the resources, and where they go.
type BundleSpec struct {
	// BundleDeploymentOptions apply to every target unless a target overrides
	// them.
	BundleDeploymentOptions `json:",inline"`

	// Paused stops new deployments of the bundle; existing ones stay as they are
	// and show as OutOfSync.
	Paused bool `json:"paused,omitempty"`
	// RolloutStrategy limits how fast a change reaches the clusters.
	RolloutStrategy *RolloutStrategy `json:"rolloutStrategy,omitempty"`
	// Resources are the files of the bundle, named by their path relative to the
	// bundle directory.
	Resources []BundleResource `json:"resources,omitempty"`
	// Targets select clusters and customize options per cluster. A cluster gets
	// the bundle when a target matches it and that target is not doNotDeploy.
	Targets []BundleTarget `json:"targets,omitempty"`
	// TargetRestrictions, when set, must also match a cluster for it to be
	// targeted; they carry the targets of the GitRepo.
	TargetRestrictions []BundleTargetRestriction `json:"targetRestrictions,omitempty"`
	// DependsOn lists bundles that must be in an accepted state on a cluster
	// before this one is deployed there.
	DependsOn []BundleRef `json:"dependsOn,omitempty"`
	// TargetCustomizationMode says whether the first matching target (FirstMatch)
	// or all matching targets in order (AllMatches) customize the options.
	TargetCustomizationMode TargetCustomizationMode `json:"targetCustomizationMode,omitempty"`
	// ContentsID, set instead of Resources, says that the bundle's content is
	// stored in an OCI registry rather than in a Content (Fleet's OCI
	// storage): it is the content's name, "s-" + the sha256 of the content's
	// manifest, which is also the digest of the artifact's one layer. The
	// registry is the one of the Secret OCIStorageSecretAnnotation names.
	ContentsID string `json:"contentsId,omitempty"`
	// HelmOpOptions, set on the Bundle of a HelmOp (Fleet's field), says
	// that the bundle has no resources: its chart is the one helm.repo,
	// helm.chart and helm.version name (the version exact, as the HelmOp
	// resolved it), which each agent downloads itself. The bundle
	// controller writes no Content for it, copies the Secret SecretName
	// names next to each BundleDeployment, and sets their
	// helmChartOptions.
	HelmOpOptions *BundleHelmOptions `json:"helmOpOptions,omitempty"`
}

// BundleHelmOptions say how an agent reaches the chart repository or
// registry of a HelmOp's bundle (Fleet's type): on a Bundle
// (spec.helmOpOptions) SecretName is the HelmOp's helmSecretName in the
// Bundle's namespace; on a BundleDeployment (spec.helmChartOptions) it is
// the manager's copy of that Secret in the cluster namespace, which only
// that cluster's agent may read.
type BundleHelmOptions struct {
	// SecretName names a Secret with keys username and password (basic
	// auth) and cacerts (PEM CAs to trust); empty for none.
	SecretName string `json:"secretName,omitempty"`
	// InsecureSkipTLSverify turns off TLS verification of the repository.
	InsecureSkipTLSverify bool `json:"insecureSkipTLSVerify,omitempty"`
}

// BundleResource is one file of a bundle.
type BundleResource struct {
	// Name is the file's path relative to the bundle directory.
	Name string `json:"name,omitempty"`
	// Content is the file's content, encoded as Encoding says.
	Content string `json:"content,omitempty"`
	// Encoding is empty for plain text or "base64+gz" for gzip, then base64.
	// +kubebuilder:validation:Enum="";base64+gz
	Encoding string `json:"encoding,omitempty"`
}

// BundleTarget selects clusters and overrides deployment options for them.
// Every criterion it sets must match; a target that sets none matches nothing.
type BundleTarget struct {
	// BundleDeploymentOptions override the bundle's options for matching
	// clusters.
	BundleDeploymentOptions `json:",inline"`

	// Name identifies the target, for messages and partitions.
	Name string `json:"name,omitempty"`
	// ClusterName matches the Cluster of that name.
	ClusterName string `json:"clusterName,omitempty"`
	// ClusterSelector matches Clusters by their labels.
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	// ClusterGroup matches the Clusters selected by the ClusterGroup of that
	// name in the cluster's namespace.
	ClusterGroup string `json:"clusterGroup,omitempty"`
	// ClusterGroupSelector matches the Clusters of the ClusterGroups whose labels
	// it selects.
	ClusterGroupSelector *metav1.LabelSelector `json:"clusterGroupSelector,omitempty"`
	// DoNotDeploy excludes the clusters this target matches.
	DoNotDeploy bool `json:"doNotDeploy,omitempty"`
}

// BundleTargetRestriction is a target without options: a cluster must match one
// of a bundle's restrictions, when it has any, to be targeted.
type BundleTargetRestriction struct {
	// Name identifies the restriction.
	Name string `json:"name,omitempty"`
	// ClusterName matches the Cluster of that name.
	ClusterName string `json:"clusterName,omitempty"`
	// ClusterSelector matches Clusters by their labels.
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	// ClusterGroup matches the Clusters of the ClusterGroup of that name.
	ClusterGroup string `json:"clusterGroup,omitempty"`
	// ClusterGroupSelector matches the Clusters of the ClusterGroups whose labels
	// it selects.
	ClusterGroupSelector *metav1.LabelSelector `json:"clusterGroupSelector,omitempty"`
}

// BundleRef names a bundle, or selects bundles by label, that another bundle
// depends on.
type BundleRef struct {
	// Name is the name of a Bundle in the same namespace.
	Name string `json:"name,omitempty"`
	// Selector selects Bundles in the same namespace by their labels.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
	// AcceptedStates are the states the dependency may be in on a cluster for
	// the dependent bundle to deploy there; empty means Ready only.
	AcceptedStates []BundleState `json:"acceptedStates,omitempty"`
}

// RolloutStrategy limits how many clusters may be unavailable while a bundle
// changes. Clusters are split into partitions, rolled out one after the other.
// Unset fields take the controller's defaults given on each field.
type RolloutStrategy struct {
	// MaxUnavailable is the number or percentage of clusters that may be not
	// ready before the rollout pauses. Default 100%.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:Pattern=`^[0-9]+%?$`
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// MaxUnavailablePartitions is the number or percentage of partitions that
	// may be unavailable before the rollout pauses. Default 0.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:Pattern=`^[0-9]+%?$`
	MaxUnavailablePartitions *intstr.IntOrString `json:"maxUnavailablePartitions,omitempty"`
	// AutoPartitionSize is the number or percentage of clusters in each
	// automatic partition. Default 25%.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:Pattern=`^[0-9]+%?$`
	AutoPartitionSize *intstr.IntOrString `json:"autoPartitionSize,omitempty"`
	// AutoPartitionThreshold is the number of clusters above which automatic
	// partitions are made. Default 200.
	// +kubebuilder:validation:Minimum=0
	AutoPartitionThreshold *int `json:"autoPartitionThreshold,omitempty"`
	// MaxNew is the number of new BundleDeployments created per reconcile.
	// Default 50.
	// +kubebuilder:validation:Minimum=0
	MaxNew *int `json:"maxNew,omitempty"`
	// Partitions are explicit partitions; when empty, partitions are made
	// automatically.
	Partitions []Partition `json:"partitions,omitempty"`
}

// Partition is a set of clusters rolled out together.
type Partition struct {
	// Name identifies the partition in status.
	Name string `json:"name,omitempty"`
	// MaxUnavailable is the number or percentage of clusters of this partition
	// that may be unavailable; defaults to the strategy's maxUnavailable.
	// +kubebuilder:validation:XIntOrString
	// +kubebuilder:validation:Pattern=`^[0-9]+%?$`
	MaxUnavailable *intstr.IntOrString `json:"maxUnavailable,omitempty"`
	// ClusterName matches the Cluster of that name.
	ClusterName string `json:"clusterName,omitempty"`
	// ClusterSelector matches Clusters by their labels.
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	// ClusterGroup matches the Clusters of the ClusterGroup of that name.
	ClusterGroup string `json:"clusterGroup,omitempty"`
	// ClusterGroupSelector matches the Clusters of the ClusterGroups whose labels
	// it selects.
	ClusterGroupSelector *metav1.LabelSelector `json:"clusterGroupSelector,omitempty"`
}

// BundleStatus is the rollout state of a Bundle over its targeted clusters.
type BundleStatus struct {
	// Conditions: Ready.
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// ObservedGeneration is the generation of the spec this status is for.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Summary counts the targeted clusters by state.
	Summary BundleSummary `json:"summary,omitempty"`
	// Display holds the values shown by kubectl.
	Display BundleDisplay `json:"display,omitempty"`
	// Unavailable is the number of targeted clusters that are not ready.
	Unavailable int `json:"unavailable,omitempty"`
	// UnavailablePartitions is the number of partitions that are unavailable.
	UnavailablePartitions int `json:"unavailablePartitions,omitempty"`
	// MaxUnavailable is the rollout strategy's maxUnavailable as a number of
	// clusters.
	MaxUnavailable int `json:"maxUnavailable,omitempty"`
	// MaxUnavailablePartitions is the rollout strategy's
	// maxUnavailablePartitions as a number of partitions.
	MaxUnavailablePartitions int `json:"maxUnavailablePartitions,omitempty"`
	// MaxNew is the number of BundleDeployments that may be created per
	// reconcile.
	MaxNew int `json:"maxNew,omitempty"`
	// NewlyCreated is the number of BundleDeployments created in the last
	// reconcile.
	NewlyCreated int `json:"newlyCreated,omitempty"`
	// Partitions is the state of each rollout partition.
	Partitions []PartitionStatus `json:"partitions,omitempty"`
	// ResourcesSHA256Sum is the checksum of the bundle's resources, to tell
	// when they changed.
	ResourcesSHA256Sum string `json:"resourcesSha256Sum,omitempty"`
}

// PartitionStatus is the rollout state of one partition.
type PartitionStatus struct {
	// Name is the partition's name.
	Name string `json:"name,omitempty"`
	// Count is the number of clusters in the partition.
	Count int `json:"count,omitempty"`
	// MaxUnavailable is the number of clusters that may be unavailable.
	MaxUnavailable int `json:"maxUnavailable,omitempty"`
	// Unavailable is the number of clusters that are unavailable.
	Unavailable int `json:"unavailable,omitempty"`
	// Summary counts the partition's clusters by state.
	Summary BundleSummary `json:"summary,omitempty"`
}

// BundleSummary counts deployments by state and lists some that are not ready.
type BundleSummary struct {
	// NotReady counts deployments in state NotReady.
	NotReady int `json:"notReady,omitempty"`
	// WaitApplied counts deployments in state WaitApplied.
	WaitApplied int `json:"waitApplied,omitempty"`
	// ErrApplied counts deployments in state ErrApplied.
	ErrApplied int `json:"errApplied,omitempty"`
	// OutOfSync counts deployments in state OutOfSync.
	OutOfSync int `json:"outOfSync,omitempty"`
	// Modified counts deployments in state Modified.
	Modified int `json:"modified,omitempty"`
	// Ready counts deployments in state Ready.
	Ready int `json:"ready,omitempty"`
	// Pending counts targets with no BundleDeployment yet.
	Pending int `json:"pending,omitempty"`
	// DesiredReady is the number of deployments there should be.
	DesiredReady int `json:"desiredReady,omitempty"`
	// NonReadyResources lists some deployments that are not ready (at most 10).
	NonReadyResources []NonReadyResource `json:"nonReadyResources,omitempty"`
}

// NonReadyResource describes a deployment that is not ready.
type NonReadyResource struct {
	// Name is the name of the BundleDeployment, Bundle or Cluster concerned.
	Name string `json:"name,omitempty"`
	// State is its state (Fleet's wire name: bundleState).
	State BundleState `json:"bundleState,omitempty"`
	// Message says why it is not ready.
	Message string `json:"message,omitempty"`
	// ModifiedStatus lists resources that differ from the desired ones (at
	// most 10).
	ModifiedStatus []ModifiedStatus `json:"modifiedStatus,omitempty"`
	// NonReadyStatus lists resources that are not ready (at most 10).
	NonReadyStatus []NonReadyStatus `json:"nonReadyStatus,omitempty"`
}

// BundleDisplay holds the Bundle values shown by kubectl.
type BundleDisplay struct {
	// ReadyClusters is "ready/desired", e.g. "2/3".
	ReadyClusters string `json:"readyClusters,omitempty"`
	// State is the worst state over the targeted clusters.
	State string `json:"state,omitempty"`
}
