package v1alpha1

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func init() {
	register(&BundleDeployment{}, &BundleDeploymentList{})
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=fleet
// +kubebuilder:printcolumn:name="Deployed",type=string,JSONPath=`.status.display.deployed`
// +kubebuilder:printcolumn:name="Monitored",type=string,JSONPath=`.status.display.monitored`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// BundleDeployment is one Bundle for one cluster. It has the Bundle's name and
// lives in the cluster's namespace. The manager writes the spec; the cluster's
// agent reads it, deploys, and writes the status.
type BundleDeployment struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec and status each have one writer, which writes them whole, so the
	// API server tracks each as one field (atomic) rather than field by
	// field: a BundleDeployment's managed fields shrink from about 1.6 KB to
	// 0.6 KB, and every write of one (the agent's status write above all,
	// one per cluster and bundle) costs the API server about a quarter less
	// CPU. Server-side apply of part of either would replace it whole.

	// Spec is what the agent should deploy; written by the manager.
	// +structType=atomic
	Spec BundleDeploymentSpec `json:"spec,omitempty"`
	// Status is what the agent deployed and how it is doing; written by the
	// agent.
	// +structType=atomic
	Status BundleDeploymentStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// BundleDeploymentList is a list of BundleDeployments.
type BundleDeploymentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the BundleDeployments.
	Items []BundleDeployment `json:"items"`
}

// BundleDeploymentSpec is what the agent should deploy. A change is first
// staged; the rollout strategy decides when the staged deployment becomes the
// current one.
type BundleDeploymentSpec struct {
	// Paused stops the agent from deploying changes.
	Paused bool `json:"paused,omitempty"`
	// OffSchedule is set while the cluster is outside its Schedules'
	// deployment windows: the agent deploys no new deploymentID, but keeps
	// checking (and, with correctDrift, correcting) what it deployed.
	OffSchedule bool `json:"offSchedule,omitempty"`
	// StagedOptions are the options of the next deployment.
	StagedOptions BundleDeploymentOptions `json:"stagedOptions,omitempty"`
	// StagedDeploymentID is the deploymentID of the next deployment.
	StagedDeploymentID string `json:"stagedDeploymentID,omitempty"`
	// Options are the options of the current deployment.
	Options BundleDeploymentOptions `json:"options,omitempty"`
	// DeploymentID is "<contentName>:<options hash>": what to deploy. The agent
	// deploys whenever it differs from status.appliedDeploymentID.
	DeploymentID string `json:"deploymentID,omitempty"`
	// DependsOn lists bundles that must be in an accepted state on this cluster
	// before the agent deploys.
	DependsOn []BundleRef `json:"dependsOn,omitempty"`
	// CorrectDrift makes the agent undo changes made to deployed resources.
	CorrectDrift *CorrectDrift `json:"correctDrift,omitempty"`
	// SealedResources are the contents of options.downstreamResources sealed
	// to the agent's key. The manager's downstreamresource controller is its
	// only writer (the bundle controller leaves it as it is).
	SealedResources *SealedResources `json:"sealedResources,omitempty"`
	// OCIContents says that the content of deploymentID is not a Content but
	// an artifact in an OCI registry (Fleet's field): the agent pulls its
	// layer by digest (the deploymentID's content name) with the Secret of
	// the same name as this BundleDeployment, in its namespace, which the
	// manager writes there (OCIStorageSecretType).
	OCIContents bool `json:"ociContents,omitempty"`
	// HelmChartOptions says that the deployment has no Content (Fleet's
	// field): the agent downloads the chart options.helm names (repo,
	// chart and an exact version; an oci:// reference; or a chart URL)
	// itself, with the Secret secretName names in this BundleDeployment's
	// namespace (type HelmOpsAccessSecretType, written by the manager), and
	// deploys it like any bundle's chart.
	HelmChartOptions *BundleHelmOptions `json:"helmChartOptions,omitempty"`
}

// SealedResources carry the Secrets and ConfigMaps a BundleDeployment's
// downstreamResources name, sealed to one agent key (internal/sealing):
// only that agent can open them, and only for this BundleDeployment's
// namespace and name.
type SealedResources struct {
	// Recipient is the fingerprint of the agent key they are sealed to.
	Recipient string `json:"recipient,omitempty"`
	// Sources are the versions sealed ("Secret/name uid resourceVersion"),
	// so that only a change of a source, or of the key, seals again.
	Sources []string `json:"sources,omitempty"`
	// Missing names the downstreamResources not found ("Secret/name"); the
	// agent deploys nothing while one is missing.
	Missing []string `json:"missing,omitempty"`
	// Data is the sealed payload.
	Data string `json:"data,omitempty"`
}

// BundleDeploymentStatus is what the agent deployed and how it is doing.
type BundleDeploymentStatus struct {
	// Conditions: Ready, Installed, Deployed, Monitored.
	// +kubebuilder:validation:MaxItems=8
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// AppliedDeploymentID is the deploymentID last applied successfully.
	// +kubebuilder:validation:MaxLength=256
	AppliedDeploymentID string `json:"appliedDeploymentID,omitempty"`
	// Release is the deployed release as "namespace/name:version".
	// +kubebuilder:validation:MaxLength=256
	Release string `json:"release,omitempty"`
	// Ready is true when every deployed resource is ready.
	Ready bool `json:"ready,omitempty"`
	// NonModified is true when no deployed resource differs from the desired
	// one.
	NonModified bool `json:"nonModified,omitempty"`
	// NonReadyStatus lists resources that are not ready (at most 10).
	// +kubebuilder:validation:MaxItems=10
	NonReadyStatus []NonReadyStatus `json:"nonReadyStatus,omitempty"`
	// ModifiedStatus lists resources that differ from the desired ones (at most
	// 10).
	// +kubebuilder:validation:MaxItems=10
	ModifiedStatus []ModifiedStatus `json:"modifiedStatus,omitempty"`
	// Display holds the values shown by kubectl.
	Display BundleDeploymentDisplay `json:"display,omitempty"`
	// SyncGeneration is the forceSyncGeneration last acted on.
	SyncGeneration *int64 `json:"syncGeneration,omitempty"`
	// Resources lists the deployed resources (at most 1000; resourceCounts
	// counts them all).
	// +kubebuilder:validation:MaxItems=1000
	Resources []BundleDeploymentResource `json:"resources,omitempty"`
	// ResourceCounts counts the deployed resources by state.
	ResourceCounts ResourceCounts `json:"resourceCounts,omitempty"`
	// IncompleteState is true when nonReadyStatus or modifiedStatus were cut
	// to their bound: resources not listed there may not be ready either.
	IncompleteState bool `json:"incompleteState,omitempty"`
}

// BundleDeploymentDisplay holds the BundleDeployment values shown by kubectl.
type BundleDeploymentDisplay struct {
	// Deployed is "True", or the reason the last apply failed.
	// +kubebuilder:validation:MaxLength=32768
	Deployed string `json:"deployed,omitempty"`
	// Monitored is "True", or the reason the resources could not be checked.
	// +kubebuilder:validation:MaxLength=32768
	Monitored string `json:"monitored,omitempty"`
	// State is the deployment's BundleState.
	// +kubebuilder:validation:MaxLength=256
	State string `json:"state,omitempty"`
}

// BundleDeploymentResource is one resource deployed by a BundleDeployment.
type BundleDeploymentResource struct {
	// Kind of the resource.
	// +kubebuilder:validation:MaxLength=256
	Kind string `json:"kind,omitempty"`
	// APIVersion of the resource.
	// +kubebuilder:validation:MaxLength=317
	APIVersion string `json:"apiVersion,omitempty"`
	// Namespace of the resource; empty when cluster-scoped.
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// Name of the resource.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// CreatedAt is the resource's creation time.
	CreatedAt metav1.Time `json:"createdAt,omitempty"`
}

// ModifiedStatus is a deployed resource that differs from the desired one.
type ModifiedStatus struct {
	// Kind of the resource.
	// +kubebuilder:validation:MaxLength=256
	Kind string `json:"kind,omitempty"`
	// APIVersion of the resource.
	// +kubebuilder:validation:MaxLength=317
	APIVersion string `json:"apiVersion,omitempty"`
	// Namespace of the resource.
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// Name of the resource.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// Create is true when the resource is missing and must be created.
	Create bool `json:"missing,omitempty"`
	// Delete is true when the resource exists but is no longer desired.
	Delete bool `json:"delete,omitempty"`
	// Patch is the JSON patch that would turn the live resource into the
	// desired one.
	// +kubebuilder:validation:MaxLength=4096
	Patch string `json:"patch,omitempty"`
}

// NonReadyStatus is a deployed resource that is not ready.
type NonReadyStatus struct {
	// UID of the resource.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=256
	UID types.UID `json:"uid,omitempty"`
	// Kind of the resource.
	// +kubebuilder:validation:MaxLength=256
	Kind string `json:"kind,omitempty"`
	// APIVersion of the resource.
	// +kubebuilder:validation:MaxLength=317
	APIVersion string `json:"apiVersion,omitempty"`
	// Namespace of the resource.
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`
	// Name of the resource.
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// Summary says why the resource is not ready, in Fleet's shape.
	Summary Summary `json:"summary,omitempty"`
}

// Summary is the state of one resource, in the shape of Fleet's (wrangler's)
// summary: a short state word, whether it is an error or on its way to
// ready, and what the resource says about itself.
type Summary struct {
	// State is a short word for the resource's state, e.g. "in-progress",
	// "updating" or "error".
	// +kubebuilder:validation:MaxLength=256
	State string `json:"state,omitempty"`
	// Error is true when the resource failed and will not become ready by
	// itself.
	Error bool `json:"error,omitempty"`
	// Transitioning is true when the resource is on its way to ready.
	Transitioning bool `json:"transitioning,omitempty"`
	// Message says why the resource is not ready (at most a few lines).
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=1024
	Message []string `json:"message,omitempty"`
}

// String is the summary in one line: its messages, else its state, after
// "error: " when it failed, e.g. "0/1 available".
func (s Summary) String() string {
	out := s.State
	if len(s.Message) > 0 {
		out = strings.Join(s.Message, "; ")
	}
	if s.Error {
		out = "error: " + out
	}
	return out
}

// ResourceName names a resource as Fleet's messages do: its kind in lower
// case, a dot and its API group ("v1" for the core group), then
// namespace/name, e.g. "job.batch default/x" or "configmap.v1 default/x".
func ResourceName(apiVersion, kind, namespace, name string) string {
	k := strings.ToLower(kind)
	if apiVersion != "" {
		k += "." + strings.SplitN(apiVersion, "/", 2)[0]
	}
	if namespace != "" {
		name = namespace + "/" + name
	}
	return k + " " + name
}

// String says what differs, in Fleet's words: "job.batch default/x
// missing", "... extra", or "... modified" and the patch.
func (m ModifiedStatus) String() string {
	msg := ResourceName(m.APIVersion, m.Kind, m.Namespace, m.Name)
	switch {
	case m.Create:
		return msg + " missing"
	case m.Delete:
		return msg + " extra"
	}
	return msg + " modified " + m.Patch
}

// String says why the resource is not ready: its name as Fleet writes it,
// then its summary, e.g. "deployment.apps default/web 0/1 available".
func (n NonReadyStatus) String() string {
	return ResourceName(n.APIVersion, n.Kind, n.Namespace, n.Name) + " " + n.Summary.String()
}

// ResourceCounts counts resources by state. Every count is written, zero
// included, as Fleet writes them.
type ResourceCounts struct {
	// Ready counts resources that are ready.
	// +optional
	Ready int `json:"ready"`
	// DesiredReady is the number of resources there should be.
	// +optional
	DesiredReady int `json:"desiredReady"`
	// WaitApplied counts resources not applied yet.
	// +optional
	WaitApplied int `json:"waitApplied"`
	// Modified counts resources that differ from the desired ones.
	// +optional
	Modified int `json:"modified"`
	// Orphaned counts resources deployed earlier and no longer desired.
	// +optional
	Orphaned int `json:"orphaned"`
	// Missing counts desired resources that do not exist.
	// +optional
	Missing int `json:"missing"`
	// Unknown counts resources whose state could not be read.
	// +optional
	Unknown int `json:"unknown"`
	// NotReady counts resources that are not ready.
	// +optional
	NotReady int `json:"notReady"`
}

// BundleDeploymentOptions say how to deploy a bundle's resources. They are the
// body of fleet.yaml, a Bundle's defaults, a target's overrides, and the
// effective options of a BundleDeployment.
type BundleDeploymentOptions struct {
	// DefaultNamespace is the namespace of objects that set none, and of the
	// Helm release.
	DefaultNamespace string `json:"defaultNamespace,omitempty"`
	// TargetNamespace forces every object into this namespace; a cluster-scoped
	// object is then an error.
	TargetNamespace string `json:"namespace,omitempty"`
	// ServiceAccount is the downstream service account to deploy as.
	ServiceAccount string `json:"serviceAccount,omitempty"`
	// KeepResources leaves deployed resources in place when the bundle is
	// removed from a cluster.
	KeepResources bool `json:"keepResources,omitempty"`
	// DeleteNamespace deletes the target namespace when the bundle is removed.
	DeleteNamespace bool `json:"deleteNamespace,omitempty"`
	// DeleteCRDResources lets the CustomResourceDefinitions the bundle deploys
	// be deleted with it (removing the bundle, or a CRD from it). By default
	// they stay, as in Fleet: deleting a CRD deletes every custom resource of
	// its kind, users' own included.
	DeleteCRDResources bool `json:"deleteCRDResources,omitempty"`
	// CreateNamespace, unset or true, creates the release namespace when it
	// does not exist, as Fleet always does; false refuses to deploy into a
	// missing namespace (ReasonNamespaceMissing), for namespaces that someone
	// else must create with their quotas and policies first.
	CreateNamespace *bool `json:"createNamespace,omitempty"`
	// AllowedTargetNamespaceSelector, set from the GitRepoRestrictions of
	// the GitRepo the bundle comes from, makes the agent refuse to deploy
	// unless the release namespace exists downstream and carries the labels
	// it selects. A target's options cannot change it.
	// +optional
	AllowedTargetNamespaceSelector *metav1.LabelSelector `json:"allowedTargetNamespaceSelector,omitempty"`
	// NamespaceLabels are set on the namespace the bundle deploys to.
	NamespaceLabels map[string]string `json:"namespaceLabels,omitempty"`
	// NamespaceAnnotations are set on the namespace the bundle deploys to.
	NamespaceAnnotations map[string]string `json:"namespaceAnnotations,omitempty"`
	// CorrectDrift makes the agent undo changes made to deployed resources.
	CorrectDrift *CorrectDrift `json:"correctDrift,omitempty"`
	// ForceSyncGeneration redeploys when bumped, even if nothing else changed.
	ForceSyncGeneration int64 `json:"forceSyncGeneration,omitempty"`
	// Ignore lists resource conditions that do not make a resource not ready.
	// +optional
	Ignore IgnoreOptions `json:"ignore,omitzero"`
	// Diff lists differences to ignore when telling whether a resource was
	// modified.
	Diff *DiffOptions `json:"diff,omitempty"`
	// Kustomize options, for bundles with a kustomization.
	Kustomize *KustomizeOptions `json:"kustomize,omitempty"`
	// YAML options, for bundles of plain manifests.
	YAML *YAMLOptions `json:"yaml,omitempty"`
	// Helm options: the chart, its values and how the release is installed.
	Helm *HelmOptions `json:"helm,omitempty"`
	// DownstreamResources name Secrets and ConfigMaps of the bundle's (or
	// HelmOp's) namespace that the agent creates in the release namespace
	// of every targeted cluster before deploying, as in Fleet. Their
	// contents travel sealed to each cluster's agent key
	// (BundleDeploymentSpec.SealedResources), never in plain text.
	// +kubebuilder:validation:MaxItems=64
	DownstreamResources []DownstreamResource `json:"downstreamResources,omitempty"`
}

// DownstreamResource names a Secret or ConfigMap to copy to the targeted
// clusters.
type DownstreamResource struct {
	// Kind is Secret or ConfigMap.
	// +kubebuilder:validation:Enum=Secret;ConfigMap
	Kind string `json:"kind,omitempty"`
	// Name is the object's name in the bundle's namespace.
	Name string `json:"name,omitempty"`
}

// CorrectDrift makes the agent undo changes made to deployed resources.
type CorrectDrift struct {
	// Enabled turns drift correction on.
	Enabled bool `json:"enabled,omitempty"`
	// Force replaces resources that cannot be patched back (helm --force).
	Force bool `json:"force,omitempty"`
	// KeepFailHistory keeps the Helm history of failed corrections.
	KeepFailHistory bool `json:"keepFailHistory,omitempty"`
}

// IgnoreOptions list resource conditions that do not make a resource not ready.
type IgnoreOptions struct {
	// Conditions are matched against each status condition of a resource; a
	// condition that has every listed key with the listed value is ignored.
	Conditions []map[string]string `json:"conditions,omitempty"`
}

// DiffOptions list differences to ignore when telling whether a resource was
// modified.
type DiffOptions struct {
	// ComparePatches are patches applied to the desired and the live resource
	// before comparing them.
	ComparePatches []ComparePatch `json:"comparePatches,omitempty"`
}

// ComparePatch names a resource and the parts of it to ignore when comparing.
type ComparePatch struct {
	// Kind of the resource.
	Kind string `json:"kind,omitempty"`
	// APIVersion of the resource.
	APIVersion string `json:"apiVersion,omitempty"`
	// Namespace of the resource.
	Namespace string `json:"namespace,omitempty"`
	// Name of the resource.
	Name string `json:"name,omitempty"`
	// Operations are JSON patch operations applied before comparing.
	Operations []Operation `json:"operations,omitempty"`
	// JSONPointers are paths (RFC 6901) removed before comparing.
	JSONPointers []string `json:"jsonPointers,omitempty"`
}

// Operation is one JSON patch operation (RFC 6902).
type Operation struct {
	// Op is the operation, e.g. "remove" or "replace".
	Op string `json:"op,omitempty"`
	// Path is the JSON pointer the operation applies to.
	Path string `json:"path,omitempty"`
	// Value is the value, as JSON, for operations that take one.
	Value string `json:"value,omitempty"`
}

// KustomizeOptions are the options of a bundle with a kustomization.
type KustomizeOptions struct {
	// Dir is the directory of the kustomization.yaml, relative to the bundle.
	Dir string `json:"dir,omitempty"`
}

// YAMLOptions are the options of a bundle of plain manifests.
type YAMLOptions struct {
	// Overlays are the names of directories under overlays/ whose files
	// replace, or as *_patch.yaml patch, the base files, in order.
	Overlays []string `json:"overlays,omitempty"`
}

// HelmOptions say which chart to deploy and how.
type HelmOptions struct {
	// Chart is a path in the bundle, a chart name in Repo, or an oci:// URL.
	Chart string `json:"chart,omitempty"`
	// Repo is the URL of the Helm repository holding Chart.
	Repo string `json:"repo,omitempty"`
	// ReleaseName is the Helm release name; derived from the bundle when unset.
	// +kubebuilder:validation:MaxLength=53
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	ReleaseName string `json:"releaseName,omitempty"`
	// Version is the chart version to fetch from Repo.
	Version string `json:"version,omitempty"`
	// TimeoutSeconds bounds each Helm operation.
	// +kubebuilder:validation:Minimum=0
	TimeoutSeconds int `json:"timeoutSeconds,omitempty"`
	// Values are Helm values, templated per cluster with ${ } unless
	// disablePreProcess is set.
	// +kubebuilder:validation:Type=object
	// +kubebuilder:pruning:PreserveUnknownFields
	Values *GenericMap `json:"values,omitempty"`
	// TemplateValues are Helm values rendered per cluster, as in Fleet: each
	// value is a ${ } template whose output is read as YAML and set at the top
	// level of Values, replacing what is there. Not rendered when
	// disablePreProcess is set.
	TemplateValues map[string]string `json:"templateValues,omitempty"`
	// ValuesFiles are paths, relative to the bundle, of values files merged
	// before Values.
	ValuesFiles []string `json:"valuesFiles,omitempty"`
	// ValuesFrom are ConfigMap or Secret keys downstream holding values, merged
	// before Values.
	ValuesFrom []ValuesFrom `json:"valuesFrom,omitempty"`
	// Force replaces resources that cannot be updated in place.
	Force bool `json:"force,omitempty"`
	// TakeOwnership adopts existing resources not owned by the release.
	TakeOwnership bool `json:"takeOwnership,omitempty"`
	// MaxHistory is the number of release revisions kept.
	// +kubebuilder:validation:Minimum=0
	MaxHistory int `json:"maxHistory,omitempty"`
	// Atomic rolls back a failed upgrade.
	Atomic bool `json:"atomic,omitempty"`
	// WaitForJobs waits for the release's Jobs to complete.
	WaitForJobs bool `json:"waitForJobs,omitempty"`
	// DisablePreProcess turns off the ${ } templating of Values and
	// TemplateValues. As in Fleet, global.fleet.clusterLabels.<label> values
	// are still replaced by the cluster's labels.
	DisablePreProcess bool `json:"disablePreProcess,omitempty"`
	// DisableDNS turns off DNS lookups in chart templates.
	DisableDNS bool `json:"disableDNS,omitempty"`
	// SkipSchemaValidation skips the chart's values.schema.json.
	SkipSchemaValidation bool `json:"skipSchemaValidation,omitempty"`
	// DisableDependencyUpdate leaves a local chart's dependencies as they
	// are in its charts/ directory, instead of fetching the ones missing
	// there when the bundle is built.
	DisableDependencyUpdate bool `json:"disableDependencyUpdate,omitempty"`
}

// ValuesFrom is a downstream source of Helm values; set one of the two.
type ValuesFrom struct {
	// ConfigMapKeyRef is a ConfigMap key holding values YAML.
	ConfigMapKeyRef *ConfigMapKeySelector `json:"configMapKeyRef,omitempty"`
	// SecretKeyRef is a Secret key holding values YAML.
	SecretKeyRef *SecretKeySelector `json:"secretKeyRef,omitempty"`
}

// ConfigMapKeySelector names a key of a ConfigMap.
type ConfigMapKeySelector struct {
	// Name of the ConfigMap.
	Name string `json:"name,omitempty"`
	// Namespace of the ConfigMap.
	Namespace string `json:"namespace,omitempty"`
	// Key in the ConfigMap.
	Key string `json:"key,omitempty"`
}

// SecretKeySelector names a key of a Secret.
type SecretKeySelector struct {
	// Name of the Secret.
	Name string `json:"name,omitempty"`
	// Namespace of the Secret.
	Namespace string `json:"namespace,omitempty"`
	// Key in the Secret.
	Key string `json:"key,omitempty"`
}
