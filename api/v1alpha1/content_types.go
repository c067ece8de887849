package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func init() {
	register(&Content{}, &ContentList{})
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,categories=fleet
// +kubebuilder:printcolumn:name="References",type=integer,JSONPath=`.status.referenceCount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Content holds the resources of a bundle, stored once for every Bundle and
// cluster with identical resources. It is named "s-" + the sha256 of the
// uncompressed resources, and deleted once no BundleDeployment refers to it.
// It is cluster-scoped so agents in any cluster namespace can read it.
type Content struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Content is the gzip of the JSON {"resources": [...]}.
	Content []byte `json:"content,omitempty"`
	// SHA256Sum is the sha256 hex of the uncompressed content.
	SHA256Sum string `json:"sha256sum,omitempty"`
	// Status counts the references to this content.
	Status ContentStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ContentList is a list of Contents.
type ContentList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the Contents.
	Items []Content `json:"items"`
}

// ContentStatus counts the references to a Content.
type ContentStatus struct {
	// ReferenceCount is the number of BundleDeployments that refer to it.
	ReferenceCount int `json:"referenceCount,omitempty"`
}
