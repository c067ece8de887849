package registration

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
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

// sealVersion prefixes a sealed credential, so that another scheme could be
// told apart.
const sealVersion = "v1."

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

// Seal encrypts cred to the agent's public key for the registration
// namespace/name.
func Seal(agentKey *ecdh.PublicKey, namespace, name string, cred SealedCredential) (string, error) {
	eph, err := NewKey()
	if err != nil {
		return "", err
	}
	shared, err := eph.ECDH(agentKey)
	if err != nil {
		return "", fmt.Errorf("sealing the credential: %w", err)
	}
	aead, err := sealingAEAD(shared, eph.PublicKey().Bytes(), agentKey.Bytes(), namespace, name)
	if err != nil {
		return "", err
	}
	plain, err := json.Marshal(cred)
	if err != nil {
		return "", err
	}
	nonce := make([]byte, aead.NonceSize())
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := append(eph.PublicKey().Bytes(), nonce...)
	out = aead.Seal(out, nonce, plain, additionalData(namespace, name))
	return sealVersion + base64.StdEncoding.EncodeToString(out), nil
}

// Open decrypts what Seal sealed to key for the registration
// namespace/name.
func Open(key *ecdh.PrivateKey, namespace, name, sealed string) (SealedCredential, error) {
	var cred SealedCredential
	if len(sealed) < len(sealVersion) || sealed[:len(sealVersion)] != sealVersion {
		return cred, errors.New("the sealed credential is of an unknown version: upgrade the agent")
	}
	raw, err := base64.StdEncoding.DecodeString(sealed[len(sealVersion):])
	if err != nil {
		return cred, fmt.Errorf("the sealed credential is not base64: %v", err)
	}
	const keyLen, nonceLen = 32, 12
	if len(raw) < keyLen+nonceLen {
		return cred, errors.New("the sealed credential is too short")
	}
	eph, err := ecdh.X25519().NewPublicKey(raw[:keyLen])
	if err != nil {
		return cred, fmt.Errorf("the sealed credential's key: %v", err)
	}
	shared, err := key.ECDH(eph)
	if err != nil {
		return cred, fmt.Errorf("opening the sealed credential: %w", err)
	}
	aead, err := sealingAEAD(shared, eph.Bytes(), key.PublicKey().Bytes(), namespace, name)
	if err != nil {
		return cred, err
	}
	plain, err := aead.Open(nil, raw[keyLen:keyLen+nonceLen], raw[keyLen+nonceLen:], additionalData(namespace, name))
	if err != nil {
		return cred, errors.New("the sealed credential does not open with this request's key: it was not sealed for this request")
	}
	if err := json.Unmarshal(plain, &cred); err != nil {
		return cred, fmt.Errorf("the sealed credential is unreadable: %v", err)
	}
	return cred, nil
}

func sealingAEAD(shared, managerPub, agentPub []byte, namespace, name string) (cipher.AEAD, error) {
	salt := append(append([]byte{}, managerPub...), agentPub...)
	key, err := hkdf.Key(sha256.New, shared, salt, "fleet.cattle.io/clusterregistration "+namespace+"/"+name, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}

func additionalData(namespace, name string) []byte {
	return []byte(namespace + "/" + name)
}
