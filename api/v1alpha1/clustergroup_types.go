package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func init() {
	register(&ClusterGroup{}, &ClusterGroupList{})
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=fleet
// +kubebuilder:printcolumn:name="Clusters-Ready",type=string,JSONPath=`.status.display.readyClusters`
// +kubebuilder:printcolumn:name="Bundles-Ready",type=string,JSONPath=`.status.display.readyBundles`
// +kubebuilder:printcolumn:name="Status",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].message`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ClusterGroup names a set of Clusters in its namespace, selected by label,
// for targets to refer to.
type ClusterGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec selects the group's clusters.
	Spec ClusterGroupSpec `json:"spec,omitempty"`
	// Status is the state of the group's clusters.
	Status ClusterGroupStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ClusterGroupList is a list of ClusterGroups.
type ClusterGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the ClusterGroups.
	Items []ClusterGroup `json:"items"`
}

// ClusterGroupSpec selects the group's clusters.
type ClusterGroupSpec struct {
	// Selector selects Clusters in the same namespace by their labels; unset
	// selects none, {} selects all.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// ClusterGroupStatus is the state of the group's clusters.
type ClusterGroupStatus struct {
	// ClusterCount is the number of clusters in the group.
	ClusterCount int `json:"clusterCount,omitempty"`
	// NonReadyClusterCount is the number of those that are not ready.
	NonReadyClusterCount int `json:"nonReadyClusterCount,omitempty"`
	// NonReadyClusters names some of the clusters that are not ready (at most
	// 10).
	NonReadyClusters []string `json:"nonReadyClusters,omitempty"`
	// Conditions: Ready.
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Summary counts the BundleDeployments of the group's clusters by state.
	Summary BundleSummary `json:"summary,omitempty"`
	// Display holds the values shown by kubectl.
	Display ClusterGroupDisplay `json:"display,omitempty"`
	// ResourceCounts counts the resources deployed to the group's clusters by
	// state.
	ResourceCounts ResourceCounts `json:"resourceCounts,omitempty"`
}

// ClusterGroupDisplay holds the ClusterGroup values shown by kubectl.
type ClusterGroupDisplay struct {
	// ReadyClusters is "ready/total", e.g. "2/3".
	ReadyClusters string `json:"readyClusters,omitempty"`
	// ReadyBundles is "ready/desired" over the group's BundleDeployments.
	ReadyBundles string `json:"readyBundles,omitempty"`
	// State is the worst state over the group's BundleDeployments.
	State string `json:"state,omitempty"`
}
