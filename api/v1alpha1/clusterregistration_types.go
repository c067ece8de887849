package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func init() {
	register(&ClusterRegistration{}, &ClusterRegistrationList{})
}

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=fleet
// +kubebuilder:printcolumn:name="Cluster-Name",type=string,JSONPath=`.status.clusterName`
// +kubebuilder:printcolumn:name="Granted",type=boolean,JSONPath=`.status.granted`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// ClusterRegistration is an agent's request to join, created with the rights
// of a ClusterRegistrationToken and labelled with the token's name. The
// manager grants it by creating or finding the Cluster and sealing the
// agent's credential to the request's key in its status.
type ClusterRegistration struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// As on BundleDeployment, spec (the agent's create) and status (the
	// manager's) each have one writer and are tracked as one field each:
	// small managed fields for the requests' creates, their grants and the
	// agents' polls, thousands at once when a fleet registers.

	// Spec identifies the registering cluster.
	// +structType=atomic
	Spec ClusterRegistrationSpec `json:"spec,omitempty"`
	// Status says whether and as which Cluster it was granted.
	// +structType=atomic
	Status ClusterRegistrationStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// ClusterRegistrationList is a list of ClusterRegistrations.
type ClusterRegistrationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the ClusterRegistrations.
	Items []ClusterRegistration `json:"items"`
}

// ClusterRegistrationSpec identifies the registering cluster.
type ClusterRegistrationSpec struct {
	// ClientID identifies the downstream cluster; a re-registration with the
	// same ClientID keeps the same Cluster.
	ClientID string `json:"clientID,omitempty"`
	// ClientRandom is a random value chosen by the agent; with ClientID it
	// names the registration, and its hash proves a renewal.
	ClientRandom string `json:"clientRandom,omitempty"`
	// PublicKey is the agent's ephemeral X25519 public key (base64, 32
	// bytes) for this request: the manager seals the credential it issues to
	// it (status.sealedCredential), so that only the agent holding the
	// private key, which it keeps in memory for this request only, can read
	// it.
	PublicKey string `json:"publicKey,omitempty"`
	// ClusterLabels are set on a Cluster created for this registration.
	ClusterLabels map[string]string `json:"clusterLabels,omitempty"`
}

// ClusterRegistrationStatus says whether and as which Cluster the registration
// was granted.
type ClusterRegistrationStatus struct {
	// ClusterName is the name of the Cluster registered.
	ClusterName string `json:"clusterName,omitempty"`
	// Granted is true once the credential was issued.
	Granted bool `json:"granted,omitempty"`
	// SealedCredential is the credential issued, sealed to spec.publicKey
	// (base64 of the manager's ephemeral X25519 public key, the AES-GCM
	// nonce and ciphertext; internal/registration.Seal): readable by the
	// agent that asked, and by nobody else, who sees only ciphertext.
	SealedCredential string `json:"sealedCredential,omitempty"`
	// Conditions: Accepted. True (Granted) once the credential is written;
	// False, with the reason and what to do, when the manager refuses the
	// registration (InvalidRegistration, TokenNotFound, IdentityConflict);
	// Unknown (PendingBound) while it waits for other agents to fetch their
	// credentials first.
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}
