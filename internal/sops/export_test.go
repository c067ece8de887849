package sops

import (
	"crypto/ecdh"
	"testing"
)

// IdentityString is k as an age identity ("AGE-SECRET-KEY-1...").
func IdentityString(t *testing.T, k *ecdh.PrivateKey) string {
	t.Helper()
	return bech32Encode(identityHRP, k.Bytes())
}
