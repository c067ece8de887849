package registration

import (
	"crypto/ecdh"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/gitfleet/fleet/internal/sealing"
)

// Sealing: the credential a grant issues travels in the ClusterRegistration's
// status, which the registration token may read by name (never list or
// watch). It is sealed to a key only the agent that asked holds:
//
//   - the agent makes an ephemeral X25519 key pair for each request, keeps
//     the private key in memory, and puts the public key in spec.publicKey;
//   - the manager makes an ephemeral key pair of its own, derives an AES-256
//     key with HKDF-SHA256 from the X25519 shared secret (salt: both public
//     keys; info: the registration's namespace and name), encrypts the
//     credential with AES-GCM (the same namespace and name as additional
//     data) and writes its public key, the nonce and the ciphertext to
//     status.sealedCredential;
//   - the agent derives the same key and opens it.
//
// Anyone else who reads the registration, another holder of the same token
// among them, sees only ciphertext. Both private keys are dropped once used,
// so the ciphertext left in the status cannot be opened later either.

// SealedCredential is what a grant seals to the agent.
type SealedCredential struct {
	Token            string `json:"token"`
	ClusterName      string `json:"clusterName"`
	ClusterNamespace string `json:"clusterNamespace"`
	Namespace        string `json:"namespace"`
	// APIServerURL and APIServerCA are the address agents reach the manager
	// at, when it has one configured: the agent keeps it and follows it as
	// it follows a published one, and the manager publishes it in the
	// cluster namespace only when it changes (AddressConfigMap).
	APIServerURL string `json:"apiServerURL,omitempty"`
	APIServerCA  string `json:"apiServerCA,omitempty"`
}

// NewKey makes an ephemeral key pair for one registration request; its
// public key goes in spec.publicKey (EncodePublicKey).
func NewKey() (*ecdh.PrivateKey, error) {
	return ecdh.X25519().GenerateKey(rand.Reader)
}

// EncodePublicKey is the spec.publicKey form of key's public key.
func EncodePublicKey(key *ecdh.PrivateKey) string {
	return base64.StdEncoding.EncodeToString(key.PublicKey().Bytes())
}

// ParsePublicKey reads spec.publicKey.
func ParsePublicKey(s string) (*ecdh.PublicKey, error) {
	if s == "" {
		return nil, errors.New("spec.publicKey is missing: agents of this version send the key their credential is sealed to")
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("spec.publicKey is not base64: %v", err)
	}
	key, err := ecdh.X25519().NewPublicKey(raw)
	if err != nil {
		return nil, fmt.Errorf("spec.publicKey is not an X25519 public key: %v", err)
	}
	return key, nil
}

// registrationBox is the sealing.Box of the registration namespace/name.
func registrationBox(namespace, name string) sealing.Box {
	return sealing.Box{
		Info:           "fleet.cattle.io/clusterregistration " + namespace + "/" + name,
		AdditionalData: []byte(namespace + "/" + name),
		What:           "the sealed credential",
	}
}

// Seal encrypts cred to the agent's public key for the registration
// namespace/name.
func Seal(agentKey *ecdh.PublicKey, namespace, name string, cred SealedCredential) (string, error) {
	plain, err := json.Marshal(cred)
	if err != nil {
		return "", err
	}
	defer clear(plain)
	return registrationBox(namespace, name).Seal(agentKey, plain)
}

// Open decrypts what Seal sealed to key for the registration
// namespace/name.
func Open(key *ecdh.PrivateKey, namespace, name, sealed string) (SealedCredential, error) {
	var cred SealedCredential
	plain, err := registrationBox(namespace, name).Open([]*ecdh.PrivateKey{key}, sealed)
	if errors.Is(err, sealing.ErrNotForThisKey) {
		return cred, errors.New("the sealed credential does not open with this request's key: it was not sealed for this request")
	}
	if err != nil {
		return cred, err
	}
	defer clear(plain)
	if err := json.Unmarshal(plain, &cred); err != nil {
		return cred, fmt.Errorf("the sealed credential is unreadable: %v", err)
	}
	return cred, nil
}
