package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func init() {
	register(&GitRepo{}, &GitRepoList{})
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=gitrepos,categories=fleet
// +kubebuilder:printcolumn:name="Repo",type=string,JSONPath=`.spec.repo`
// +kubebuilder:printcolumn:name="Commit",type=string,JSONPath=`.status.commit`
// +kubebuilder:printcolumn:name="BundleDeployments-Ready",type=string,JSONPath=`.status.display.readyBundleDeployments`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// GitRepo is a git repository to watch. Each bundle directory under its paths
// becomes a Bundle, deployed to the clusters its targets select.
type GitRepo struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says which repository, revision and paths to deploy, and where.
	Spec GitRepoSpec `json:"spec"`
	// Status is the commit deployed and the state of its bundles.
	Status GitRepoStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// GitRepoList is a list of GitRepos.
type GitRepoList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the GitRepos.
	Items []GitRepo `json:"items"`
}

// GitRepoSpec says which repository, revision and paths to deploy, and where.
type GitRepoSpec struct {
	// Repo is the URL of the repository: https, ssh, or a file path for local
	// use.
	// +required
	// +kubebuilder:validation:MinLength=1
	Repo string `json:"repo"`
	// Branch to follow; defaults to the remote's HEAD (master or main).
	Branch string `json:"branch,omitempty"`
	// Revision is a tag or commit to deploy; it wins over Branch.
	Revision string `json:"revision,omitempty"`
	// Paths are the directories searched for bundles; defaults to the root.
	// Globs such as "charts/*" select every matching directory, and a leading
	// "/" is dropped, as in Fleet.
	Paths []string `json:"paths,omitempty"`
	// Bundles, when set, name the bundles to build instead of searching Paths
	// (Fleet's driven scan): each base directory is one bundle, with no
	// search below it, configured by its options file. Lets one directory
	// give several bundles, e.g. a Kustomize base with one options file per
	// environment.
	Bundles []BundlePath `json:"bundles,omitempty"`
	// ClientSecretName names a Secret of type kubernetes.io/basic-auth or
	// kubernetes.io/ssh-auth (optionally with a known_hosts key) used to fetch
	// the repository.
	ClientSecretName string `json:"clientSecretName,omitempty"`
	// HelmSecretName names a Secret with credentials for Helm repositories.
	// They are sent only to chart repositories and registries whose URL
	// matches HelmRepoURLRegex; without it, to none.
	HelmSecretName string `json:"helmSecretName,omitempty"`
	// HelmRepoURLRegex is a regular expression that the whole URL of a chart
	// repository, registry or chart (helm.repo, or helm.chart when it is a
	// URL) must match for the helmSecretName credentials to be sent to it.
	HelmRepoURLRegex string `json:"helmRepoURLRegex,omitempty"`
	// OCIRegistrySecret names a Secret of type
	// fleet.cattle.io/bundle-oci-storage/v1alpha1 in the GitRepo's namespace:
	// the GitRepo's bundle contents are then pushed to that OCI registry
	// instead of being stored in etcd (Fleet's OCI storage). Without it, a
	// Secret named "ocistorage" in the namespace does the same for every
	// GitRepo there. A named Secret that is missing or invalid stops the
	// sync: there is no fallback to etcd.
	OCIRegistrySecret string `json:"ociRegistrySecret,omitempty"`
	// CABundle is the PEM CA bundle to trust for the repository's TLS.
	CABundle []byte `json:"caBundle,omitempty"`
	// InsecureSkipTLSverify turns off TLS verification for the repository.
	InsecureSkipTLSverify bool `json:"insecureSkipTLSVerify,omitempty"`
	// TargetNamespace forces every object of the repo's bundles into this
	// namespace.
	TargetNamespace string `json:"targetNamespace,omitempty"`
	// ServiceAccount is the downstream service account to deploy as.
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// Paused keeps the current deployments; new commits are fetched but not
	// rolled out.
	Paused bool `json:"paused,omitempty"`
	// PollingInterval is how often the remote is checked for new commits, as a
	// Go duration such as "15s" or "1h30m"; defaults to 15s.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	PollingInterval *metav1.Duration `json:"pollingInterval,omitempty"`
	// DisablePolling stops polling; new commits then arrive through the webhook
	// only.
	DisablePolling bool `json:"disablePolling,omitempty"`
	// WebhookSecret names a Secret holding the shared secret webhook calls must
	// be signed with.
	WebhookSecret string `json:"webhookSecret,omitempty"`
	// ForceSyncGeneration redeploys every bundle when bumped.
	ForceSyncGeneration int64 `json:"forceSyncGeneration,omitempty"`
	// KeepResources leaves deployed resources in place when a bundle is
	// removed.
	KeepResources bool `json:"keepResources,omitempty"`
	// DeleteNamespace deletes the target namespace when a bundle is removed.
	DeleteNamespace bool `json:"deleteNamespace,omitempty"`
	// CorrectDrift makes agents undo changes made to deployed resources.
	CorrectDrift *CorrectDrift `json:"correctDrift,omitempty"`
	// Targets select the clusters to deploy to; they also restrict the targets
	// a fleet.yaml may add. Defaults to {name: default, clusterGroup: default}.
	Targets []GitTarget `json:"targets,omitempty"`
}

// BundlePath is one bundle of a driven scan.
type BundlePath struct {
	// Base is the bundle's directory, relative to the repository root; every
	// file below it is a resource.
	// +kubebuilder:validation:MinLength=1
	Base string `json:"base"`
	// Options is the bundle's fleet.yaml, under any name, relative to Base;
	// defaults to Base's fleet.yaml, if any.
	Options string `json:"options,omitempty"`
}

// GitTarget selects clusters. Every criterion it sets must match; a target
// that sets none matches nothing.
type GitTarget struct {
	// Name identifies the target.
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

// GitRepoStatus is the commit deployed and the state of its bundles.
type GitRepoStatus struct {
	// ObservedGeneration is the generation of the spec this status is for.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Commit is the commit the bundles were last built from.
	Commit string `json:"commit,omitempty"`
	// WebhookCommit is the latest commit announced by a webhook call, fetched
	// on the next reconcile.
	WebhookCommit string `json:"webhookCommit,omitempty"`
	// LastPollingTriggered is when the remote was last polled.
	LastPollingTriggered metav1.Time `json:"lastPollingTriggered,omitempty"`
	// ReadyClusters is the number of targeted clusters where every bundle is
	// ready.
	ReadyClusters int `json:"readyClusters,omitempty"`
	// DesiredReadyClusters is the number of targeted clusters.
	DesiredReadyClusters int `json:"desiredReadyClusters,omitempty"`
	// Summary counts the repo's BundleDeployments by state.
	Summary BundleSummary `json:"summary,omitempty"`
	// Display holds the values shown by kubectl.
	Display GitRepoDisplay `json:"display,omitempty"`
	// Conditions: Ready, Accepted, GitPolling, and Warning while a
	// fleet.yaml holds keys that are ignored.
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Resources lists the resources the repo deploys and their state.
	Resources []GitRepoResource `json:"resources,omitempty"`
	// ResourceCounts counts the repo's resources by state, over all clusters.
	ResourceCounts ResourceCounts `json:"resourceCounts,omitempty"`
	// PerClusterResourceCounts counts the repo's resources by state on each
	// cluster, keyed by the cluster's "namespace/name".
	PerClusterResourceCounts map[string]*ResourceCounts `json:"perClusterResourceCounts,omitempty"`
}

// GitRepoDisplay holds the GitRepo values shown by kubectl.
type GitRepoDisplay struct {
	// ReadyBundleDeployments is "ready/desired", e.g. "4/5".
	ReadyBundleDeployments string `json:"readyBundleDeployments,omitempty"`
	// State is the worst state over the repo's BundleDeployments.
	State string `json:"state,omitempty"`
	// Message explains State.
	Message string `json:"message,omitempty"`
	// Error is true when State is an error.
	Error bool `json:"error,omitempty"`
}

// GitRepoResource is one resource deployed by a GitRepo and its state over
// the clusters it is deployed to (Fleet's Resource).
type GitRepoResource struct {
	// APIVersion of the resource.
	APIVersion string `json:"apiVersion,omitempty"`
	// Kind of the resource.
	Kind string `json:"kind,omitempty"`
	// Type is the lower-case kind prefixed with the API group and a dot
	// when it has one, e.g. "apps.deployment" or "configmap".
	Type string `json:"type,omitempty"`
	// ID is "namespace/name", or "name" when cluster-scoped.
	ID string `json:"id,omitempty"`
	// Namespace of the resource.
	Namespace string `json:"namespace,omitempty"`
	// Name of the resource.
	Name string `json:"name,omitempty"`
	// IncompleteState is true when the state may be incomplete: an agent
	// listed only the first of its not-ready or modified resources, or the
	// per-cluster lists below were cut.
	IncompleteState bool `json:"incompleteState,omitempty"`
	// State is the first state other than Ready over the clusters, e.g.
	// "NotReady", "Modified", "Missing", "WaitApplied"; Ready when ready
	// everywhere.
	State string `json:"state,omitempty"`
	// Error is true when the resource failed on some cluster.
	Error bool `json:"error,omitempty"`
	// Transitioning is true when the resource is on its way to ready on
	// some cluster.
	Transitioning bool `json:"transitioning,omitempty"`
	// Message is what the resource says about itself on the first cluster
	// where it is not ready.
	Message string `json:"message,omitempty"`
	// PerClusterState lists, for each state, the clusters
	// ("namespace/name" of the Cluster) where the resource is in it (at most
	// 10 per state).
	PerClusterState PerClusterState `json:"perClusterState,omitzero"`
}

// PerClusterState lists the clusters where a resource is in each state.
type PerClusterState struct {
	// Ready clusters.
	Ready []string `json:"ready,omitempty"`
	// WaitApplied clusters: the deployment is not applied there yet.
	WaitApplied []string `json:"waitApplied,omitempty"`
	// Pending clusters.
	Pending []string `json:"pending,omitempty"`
	// Modified clusters: the resource differs from the desired one.
	Modified []string `json:"modified,omitempty"`
	// Orphaned clusters: the resource is no longer desired but still there.
	Orphaned []string `json:"orphaned,omitempty"`
	// Missing clusters: the resource is desired but absent.
	Missing []string `json:"missing,omitempty"`
	// Unknown clusters: the state could not be told.
	Unknown []string `json:"unknown,omitempty"`
	// NotReady clusters.
	NotReady []string `json:"notReady,omitempty"`
}
