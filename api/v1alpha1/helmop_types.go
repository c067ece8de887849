package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func init() {
	register(&HelmOp{}, &HelmOpList{})
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:path=helmops,categories=fleet
// +kubebuilder:printcolumn:name="Repo",type=string,JSONPath=`.spec.helm.repo`
// +kubebuilder:printcolumn:name="Chart",type=string,JSONPath=`.spec.helm.chart`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.version`
// +kubebuilder:printcolumn:name="BundleDeployments-Ready",type=string,JSONPath=`.status.display.readyBundleDeployments`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// HelmOp deploys a chart from a Helm repository, an OCI registry or a chart
// URL without a git repository: it becomes one Bundle of the same name,
// deployed to the clusters its targets select, like a GitRepo's bundles.
type HelmOp struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec names the chart, its version or version constraint, its values
	// and where it goes.
	Spec HelmOpSpec `json:"spec,omitempty"`
	// Status is the version resolved and the state of its deployments.
	Status HelmOpStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// HelmOpList is a list of HelmOps.
type HelmOpList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the HelmOps.
	Items []HelmOp `json:"items"`
}

// HelmOpSpec is a Bundle's spec (options, helm, targets, dependsOn,
// rolloutStrategy ...) whose helm options name a remote chart, plus how to
// reach it. As in Fleet, helm names the chart one of three ways: repo (a
// Helm repository URL) and chart (its name); repo an oci:// reference and
// chart empty; or chart a URL of a packaged chart (.tgz) with repo and
// version empty. helm.version is an exact version or a semver constraint
// ("1.2.x", ">= 1.0, < 2", empty or "*" for the newest); the manager
// resolves it, so every cluster gets the same version.
type HelmOpSpec struct {
	// BundleSpec is the spec of the Bundle the HelmOp becomes; its
	// resources are ignored: the chart is the Bundle's only content.
	BundleSpec `json:",inline"`

	// Labels are copied to the Bundle, e.g. for a dependsOn.selector.
	Labels map[string]string `json:"labels,omitempty"`
	// PollingInterval is how often the repository is checked for a newer
	// version matching helm.version, as a Go duration such as "5m". As in
	// Fleet, unset or "0" turns polling off: the version is resolved when
	// the spec changes only. Polling applies to version constraints, not to
	// exact versions or chart URLs.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	PollingInterval *metav1.Duration `json:"pollingInterval,omitempty"`
	// HelmSecretName names a Secret in the HelmOp's namespace with
	// credentials for the repository or registry: keys username and
	// password (basic auth), and cacerts (PEM CAs to trust). The manager
	// uses them itself, sent only to the host of helm.repo (or of
	// helm.chart when it is a URL); they are never copied anywhere.
	HelmSecretName string `json:"helmSecretName,omitempty"`
	// InsecureSkipTLSverify turns off TLS verification for the repository.
	InsecureSkipTLSverify bool `json:"insecureSkipTLSVerify,omitempty"`
}

// HelmOpStatus is the version resolved and the state of the HelmOp's
// deployments, in the shape of a GitRepo's status.
type HelmOpStatus struct {
	// ObservedGeneration is the generation of the spec the Bundle was last
	// written for.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Version is the chart version deployed: helm.version resolved against
	// the repository.
	Version string `json:"version,omitempty"`
	// LastPollingTime is when the repository was last checked for a new
	// version.
	LastPollingTime metav1.Time `json:"lastPollingTriggered,omitempty"`
	// ReadyClusters is the number of targeted clusters where the chart is
	// ready.
	ReadyClusters int `json:"readyClusters,omitempty"`
	// DesiredReadyClusters is the number of targeted clusters.
	DesiredReadyClusters int `json:"desiredReadyClusters,omitempty"`
	// Summary counts the HelmOp's BundleDeployments by state.
	Summary BundleSummary `json:"summary,omitempty"`
	// Display holds the values shown by kubectl.
	Display GitRepoDisplay `json:"display,omitempty"`
	// Conditions: Accepted (the spec could be acted on), Polled (the last
	// check of the repository, while polling), Ready.
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Resources lists the resources the HelmOp deploys and their state.
	Resources []GitRepoResource `json:"resources,omitempty"`
	// ResourceCounts counts the HelmOp's resources by state, over all
	// clusters.
	ResourceCounts ResourceCounts `json:"resourceCounts,omitempty"`
}

// GetConditions returns the HelmOp's status conditions.
func (h *HelmOp) GetConditions() []metav1.Condition { return h.Status.Conditions }

// SetConditions replaces the HelmOp's status conditions.
func (h *HelmOp) SetConditions(c []metav1.Condition) { h.Status.Conditions = c }
