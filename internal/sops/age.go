package sops

import (
	"crypto/ecdh"
	"errors"
	"fmt"
	"strings"

	"filippo.io/age"
)

// The human-readable parts of age's bech32 keys.
const (
	recipientHRP = "age"
	identityHRP  = "AGE-SECRET-KEY-"
)

// Recipient is the age recipient ("age1...") of an agent's public key: what
// `sops --encrypt --age` takes.
func Recipient(pub *ecdh.PublicKey) string {
	return bech32Encode(recipientHRP, pub.Bytes())
}

// identities turns the agent's private keys into age identities, skipping
// nil ones (no previous key).
func identities(keys []*ecdh.PrivateKey) ([]age.Identity, []string, error) {
	var ids []age.Identity
	var recipients []string
	for _, k := range keys {
		if k == nil {
			continue
		}
		if k.Curve() != ecdh.X25519() {
			return nil, nil, errors.New("the agent's key is not an X25519 key")
		}
		id, err := age.ParseX25519Identity(strings.ToUpper(bech32Encode(identityHRP, k.Bytes())))
		if err != nil {
			return nil, nil, fmt.Errorf("the agent's key is not an age identity: %v", err)
		}
		ids = append(ids, id)
		recipients = append(recipients, Recipient(k.PublicKey()))
	}
	if len(ids) == 0 {
		return nil, nil, errors.New("the agent has no key to open SOPS files with")
	}
	return ids, recipients, nil
}

// bech32 (BIP 173) as age uses it: lower case, no length limit.
const bech32Charset = "qpzry9x8gf2tvdw0s3jn54khce6mua7l"

func bech32Polymod(values []byte) uint32 {
	gen := [5]uint32{0x3b6a57b2, 0x26508e6d, 0x1ea119fa, 0x3d4233dd, 0x2a1462b3}
	chk := uint32(1)
	for _, v := range values {
		top := chk >> 25
		chk = (chk&0x1ffffff)<<5 ^ uint32(v)
		for i := range 5 {
			if (top>>i)&1 == 1 {
				chk ^= gen[i]
			}
		}
	}
	return chk
}

func bech32HRPExpand(hrp string) []byte {
	out := make([]byte, 0, 2*len(hrp)+1)
	for i := range len(hrp) {
		out = append(out, hrp[i]>>5)
	}
	out = append(out, 0)
	for i := range len(hrp) {
		out = append(out, hrp[i]&31)
	}
	return out
}

// to5Bits regroups 8-bit bytes into 5-bit groups, the last one padded.
func to5Bits(data []byte) []byte {
	var out []byte
	acc, bits := uint32(0), uint(0)
	for _, b := range data {
		acc = acc<<8 | uint32(b)
		bits += 8
		for bits >= 5 {
			bits -= 5
			out = append(out, byte(acc>>bits)&31)
		}
	}
	if bits > 0 {
		out = append(out, byte(acc<<(5-bits))&31)
	}
	return out
}

// bech32Encode encodes data under hrp, in lower case.
func bech32Encode(hrp string, data []byte) string {
	hrp = strings.ToLower(hrp)
	values := to5Bits(data)
	mod := bech32Polymod(append(append(bech32HRPExpand(hrp), values...), 0, 0, 0, 0, 0, 0)) ^ 1
	var b strings.Builder
	b.WriteString(hrp)
	b.WriteByte('1')
	for _, v := range values {
		b.WriteByte(bech32Charset[v])
	}
	for i := range 6 {
		b.WriteByte(bech32Charset[(mod>>(5*(5-i)))&31])
	}
	return b.String()
}
