package sealing

import (
	"crypto/ecdh"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
)

// Resource is one Secret or ConfigMap as it is created downstream.
type Resource struct {
	Kind string `json:"kind"`
	Name string `json:"name"`
	// Type is a Secret's type.
	Type string `json:"type,omitempty"`
	// Data are a Secret's data or a ConfigMap's binaryData.
	Data map[string][]byte `json:"data,omitempty"`
	// StringData are a ConfigMap's data.
	StringData map[string]string `json:"stringData,omitempty"`
	// Labels and Annotations are the source's, less kubectl's and fleet's
	// own.
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Payload is what one BundleDeployment's seal holds.
type Payload struct {
	Resources []Resource `json:"resources"`
}

// NewKey makes an agent's sealing key pair.
func NewKey() (*ecdh.PrivateKey, error) {
	return ecdh.X25519().GenerateKey(rand.Reader)
}

// EncodePrivateKey is how the agent stores its key downstream.
func EncodePrivateKey(k *ecdh.PrivateKey) []byte {
	return []byte(base64.StdEncoding.EncodeToString(k.Bytes()))
}

// ParsePrivateKey reads what EncodePrivateKey wrote.
func ParsePrivateKey(b []byte) (*ecdh.PrivateKey, error) {
	raw, err := base64.StdEncoding.DecodeString(string(b))
	if err != nil {
		return nil, fmt.Errorf("the sealing key is not base64: %v", err)
	}
	k, err := ecdh.X25519().NewPrivateKey(raw)
	if err != nil {
		return nil, fmt.Errorf("the sealing key is not an X25519 key: %v", err)
	}
	return k, nil
}

// EncodePublicKey is the form of the public key on the check-in Lease.
func EncodePublicKey(k *ecdh.PublicKey) string {
	return base64.StdEncoding.EncodeToString(k.Bytes())
}

// ParsePublicKey reads a public key from the check-in Lease.
func ParsePublicKey(s string) (*ecdh.PublicKey, error) {
	if s == "" {
		return nil, errors.New("the agent has not published a sealing key")
	}
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("the agent's sealing key is not base64: %v", err)
	}
	k, err := ecdh.X25519().NewPublicKey(raw)
	if err != nil {
		return nil, fmt.Errorf("the agent's sealing key is not an X25519 public key: %v", err)
	}
	return k, nil
}

// Fingerprint names a public key in SealedResources.Recipient.
func Fingerprint(k *ecdh.PublicKey) string {
	sum := sha256.Sum256(k.Bytes())
	return hex.EncodeToString(sum[:12])
}

// bundleDeploymentBox is the Box of the BundleDeployment namespace/name.
func bundleDeploymentBox(namespace, name string) Box {
	return Box{
		Info:           "fleet.cattle.io/bundledeployment " + namespace + "/" + name,
		AdditionalData: []byte("bundledeployment/" + namespace + "/" + name),
		What:           "the seal of BundleDeployment " + namespace + "/" + name,
	}
}

// Seal seals p to the agent key to for the BundleDeployment namespace/name.
func Seal(to *ecdh.PublicKey, namespace, name string, p Payload) (string, error) {
	plain, err := json.Marshal(p)
	if err != nil {
		return "", err
	}
	defer clear(plain)
	return bundleDeploymentBox(namespace, name).Seal(to, plain)
}

// Open opens what Seal sealed for the BundleDeployment namespace/name, with
// whichever of keys it was sealed to. Its errors never hold any of the
// sealed content.
func Open(keys []*ecdh.PrivateKey, namespace, name, sealed string) (Payload, error) {
	var p Payload
	plain, err := bundleDeploymentBox(namespace, name).Open(keys, sealed)
	if errors.Is(err, ErrNotForThisKey) {
		return p, fmt.Errorf("the sealed resources do not open with this agent's keys for BundleDeployment %s/%s: they were sealed to another key or for another BundleDeployment", namespace, name)
	}
	if err != nil {
		return p, err
	}
	err = json.Unmarshal(plain, &p)
	clear(plain)
	if err != nil {
		return Payload{}, errors.New("the sealed resources open but do not decode")
	}
	return p, nil
}
