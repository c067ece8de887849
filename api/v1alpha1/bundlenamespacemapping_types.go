package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func init() {
	register(&BundleNamespaceMapping{}, &BundleNamespaceMappingList{})
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=fleet
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// BundleNamespaceMapping lets Bundles in its namespace target Clusters in
// other namespaces: bundles matching BundleSelector may target clusters in the
// namespaces matching NamespaceSelector.
type BundleNamespaceMapping struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// BundleSelector selects Bundles in the mapping's namespace by their
	// labels; {} selects all.
	// +required
	BundleSelector *metav1.LabelSelector `json:"bundleSelector"`
	// NamespaceSelector selects, by their labels, the namespaces whose Clusters
	// those Bundles may target.
	// +required
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector"`
}

// +kubebuilder:object:root=true

// BundleNamespaceMappingList is a list of BundleNamespaceMappings.
type BundleNamespaceMappingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the BundleNamespaceMappings.
	Items []BundleNamespaceMapping `json:"items"`
}
