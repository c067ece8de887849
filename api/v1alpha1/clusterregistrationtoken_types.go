package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func init() {
	register(&ClusterRegistrationToken{}, &ClusterRegistrationTokenList{})
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=fleet
// +kubebuilder:printcolumn:name="Secret-Name",type=string,JSONPath=`.status.secretName`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.status.expires`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ClusterRegistrationToken lets agents register clusters into its namespace.
// The manager makes a ServiceAccount that may only create
// ClusterRegistrations there and get them by name (to read the grant, sealed
// to the requesting agent's key), and writes its token, with what an agent needs
// to reach the manager, to the Secret named in status. An expired token is
// deleted with its ServiceAccount.
type ClusterRegistrationToken struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says how long the token lives.
	Spec ClusterRegistrationTokenSpec `json:"spec,omitempty"`
	// Status says when it expires and where the agent values are.
	Status ClusterRegistrationTokenStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ClusterRegistrationTokenList is a list of ClusterRegistrationTokens.
type ClusterRegistrationTokenList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the ClusterRegistrationTokens.
	Items []ClusterRegistrationToken `json:"items"`
}

// ClusterRegistrationTokenSpec says how long the token lives.
type ClusterRegistrationTokenSpec struct {
	// TTL is the token's lifetime from its creation, as a Go duration such as
	// "12h"; unset or "0" never expires.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^(0|([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+)$`
	TTL *metav1.Duration `json:"ttl,omitempty"`
}

// ClusterRegistrationTokenStatus says when the token expires and where the
// agent values are.
type ClusterRegistrationTokenStatus struct {
	// Expires is when the token is deleted; unset when it never expires.
	Expires *metav1.Time `json:"expires,omitempty"`
	// SecretName names the Secret, in the token's namespace, whose key
	// "values" holds the YAML an agent needs to register.
	SecretName string `json:"secretName,omitempty"`
	// Conditions: Issued, False with a reason when the token cannot be
	// issued (e.g. NotOwned: its name is taken by a ServiceAccount fleet did
	// not make for it).
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
