package sealing

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/ecdh"
	"crypto/hkdf"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
)

// version prefixes sealed data, so that another scheme can be told apart.
const version = "v1."

// keyLen and nonceLen are the sizes of an X25519 public key and of an
// AES-GCM nonce.
const keyLen, nonceLen = 32, 12

// ErrNotForThisKey is what Box.Open returns when none of the keys opens the
// sealed data: it was sealed to another key, for another object, or
// tampered with.
var ErrNotForThisKey = errors.New("does not open with the keys given")

// Box is one use of the scheme, for one object: the sealed form is
// "v1." + base64(ephemeral public key, nonce, AES-256-GCM ciphertext), the
// AES key derived with HKDF-SHA256 from the X25519 shared secret (salt:
// the ephemeral and the recipient's public keys; info: Info). Info and
// AdditionalData name the object, so that a sealed copy moved to another
// object opens nowhere. What names the sealed data in errors.
type Box struct {
	Info           string
	AdditionalData []byte
	What           string
}

// Seal seals plain to the public key to, with a fresh ephemeral key.
func (b Box) Seal(to *ecdh.PublicKey, plain []byte) (string, error) {
	eph, err := NewKey()
	if err != nil {
		return "", err
	}
	shared, err := eph.ECDH(to)
	if err != nil {
		return "", fmt.Errorf("sealing %s: %w", b.What, err)
	}
	aead, err := b.aead(shared, eph.PublicKey().Bytes(), to.Bytes())
	if err != nil {
		return "", err
	}
	nonce := make([]byte, nonceLen)
	if _, err := rand.Read(nonce); err != nil {
		return "", err
	}
	out := append(eph.PublicKey().Bytes(), nonce...)
	out = aead.Seal(out, nonce, plain, b.AdditionalData)
	return version + base64.StdEncoding.EncodeToString(out), nil
}

// Open opens what Seal sealed, with whichever of keys it was sealed to.
// Its errors hold nothing of the sealed data; ErrNotForThisKey when no key
// opens it.
func (b Box) Open(keys []*ecdh.PrivateKey, sealed string) ([]byte, error) {
	rest, ok := strings.CutPrefix(sealed, version)
	if !ok {
		return nil, fmt.Errorf("%s is of an unknown version: upgrade the agent", b.What)
	}
	raw, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		return nil, fmt.Errorf("%s is not base64", b.What)
	}
	if len(raw) < keyLen+nonceLen {
		return nil, fmt.Errorf("%s is too short", b.What)
	}
	eph, err := ecdh.X25519().NewPublicKey(raw[:keyLen])
	if err != nil {
		return nil, fmt.Errorf("the key of %s is not an X25519 key", b.What)
	}
	for _, k := range keys {
		if k == nil {
			continue
		}
		shared, err := k.ECDH(eph)
		if err != nil {
			continue
		}
		aead, err := b.aead(shared, eph.Bytes(), k.PublicKey().Bytes())
		if err != nil {
			return nil, err
		}
		if plain, err := aead.Open(nil, raw[keyLen:keyLen+nonceLen], raw[keyLen+nonceLen:], b.AdditionalData); err == nil {
			return plain, nil
		}
	}
	return nil, fmt.Errorf("%s %w", b.What, ErrNotForThisKey)
}

func (b Box) aead(shared, ephPub, recipientPub []byte) (cipher.AEAD, error) {
	salt := append(append([]byte{}, ephPub...), recipientPub...)
	key, err := hkdf.Key(sha256.New, shared, salt, b.Info, 32)
	if err != nil {
		return nil, err
	}
	block, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(block)
}
