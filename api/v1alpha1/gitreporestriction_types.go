package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func init() {
	register(&GitRepoRestriction{}, &GitRepoRestrictionList{})
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=fleet
// +kubebuilder:printcolumn:name="Default-ServiceAccount",type=string,JSONPath=`.defaultServiceAccount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// GitRepoRestriction limits what the GitRepos of its namespace may use; an
// empty list allows anything. A GitRepo that breaks a restriction is not
// deployed and says why in its Accepted condition.
type GitRepoRestriction struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// DefaultServiceAccount is used by GitRepos that set no serviceAccount.
	DefaultServiceAccount string `json:"defaultServiceAccount,omitempty"`
	// AllowedServiceAccounts are the serviceAccounts GitRepos may set.
	AllowedServiceAccounts []string `json:"allowedServiceAccounts,omitempty"`
	// AllowedRepoPatterns are regular expressions one of which a GitRepo's repo
	// must match.
	AllowedRepoPatterns []string `json:"allowedRepoPatterns,omitempty"`
	// DefaultClientSecretName is used by GitRepos that set no clientSecretName.
	DefaultClientSecretName string `json:"defaultClientSecretName,omitempty"`
	// AllowedClientSecretNames are the clientSecretNames GitRepos may set.
	AllowedClientSecretNames []string `json:"allowedClientSecretNames,omitempty"`
	// AllowedTargetNamespaces are the targetNamespaces GitRepos may set.
	AllowedTargetNamespaces []string `json:"allowedTargetNamespaces,omitempty"`
	// AllowedTargetNamespaceSelector selects, by their labels, the
	// namespaces of downstream clusters GitRepos may deploy to: a GitRepo
	// must then set targetNamespace, and the agent refuses to deploy into a
	// namespace that is missing or does not carry the labels. It applies
	// besides allowedTargetNamespaces (both must allow the namespace).
	// +optional
	AllowedTargetNamespaceSelector *metav1.LabelSelector `json:"allowedTargetNamespaceSelector,omitempty"`
}

// +kubebuilder:object:root=true

// GitRepoRestrictionList is a list of GitRepoRestrictions.
type GitRepoRestrictionList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the GitRepoRestrictions.
	Items []GitRepoRestriction `json:"items"`
}
