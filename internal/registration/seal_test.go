package registration_test

import (
	"crypto/ecdh"
	"encoding/base64"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gitfleet/fleet/internal/registration"
)

func TestSealOpens(t *testing.T) {
	g := NewWithT(t)
	agent, err := registration.NewKey()
	g.Expect(err).NotTo(HaveOccurred())
	pub, err := registration.ParsePublicKey(registration.EncodePublicKey(agent))
	g.Expect(err).NotTo(HaveOccurred())
	want := registration.SealedCredential{Token: "secret-token", ClusterName: "c", ClusterNamespace: "cluster-ns", Namespace: "fleet-default"}
	sealed, err := registration.Seal(pub, "fleet-default", "request-1", want)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sealed).NotTo(ContainSubstring("secret-token"))
	raw, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(sealed, "v1."))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(raw)).NotTo(ContainSubstring("secret-token"), "the token is not in the clear")

	got, err := registration.Open(agent, "fleet-default", "request-1", sealed)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want))

	again, err := registration.Seal(pub, "fleet-default", "request-1", want)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).NotTo(Equal(sealed), "each seal uses a key pair of its own")
}

func TestSealRefusesOthers(t *testing.T) {
	g := NewWithT(t)
	agent, _ := registration.NewKey()
	other, _ := registration.NewKey()
	pub, _ := registration.ParsePublicKey(registration.EncodePublicKey(agent))
	sealed, err := registration.Seal(pub, "fleet-default", "request-1", registration.SealedCredential{Token: "t"})
	g.Expect(err).NotTo(HaveOccurred())

	_, err = registration.Open(other, "fleet-default", "request-1", sealed)
	g.Expect(err).To(MatchError(ContainSubstring("not sealed for this request")), "another key opens nothing")
	_, err = registration.Open(agent, "fleet-default", "request-2", sealed)
	g.Expect(err).To(MatchError(ContainSubstring("not sealed for this request")), "moved to another registration, it opens nothing")
	raw, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(sealed, "v1."))
	raw[len(raw)-1] ^= 1
	_, err = registration.Open(agent, "fleet-default", "request-1", "v1."+base64.StdEncoding.EncodeToString(raw))
	g.Expect(err).To(MatchError(ContainSubstring("not sealed for this request")), "tampered, it opens nothing")
	_, err = registration.Open(agent, "fleet-default", "request-1", "v9.abc")
	g.Expect(err).To(MatchError(ContainSubstring("unknown version")))

	for _, bad := range []string{"", "!!", base64.StdEncoding.EncodeToString([]byte("short"))} {
		_, err := registration.ParsePublicKey(bad)
		g.Expect(err).To(MatchError(ContainSubstring("spec.publicKey")), "%q", bad)
	}
}

// A credential sealed by an earlier manager still opens: the sealed form is
// the wire format between versions of manager and agent (this one was
// sealed before the scheme moved to sealing.Box).
func TestOpenReadsTheWireFormat(t *testing.T) {
	g := NewWithT(t)
	raw, err := base64.StdEncoding.DecodeString("9Xr3DthZTfdyPnlxGnJprtR4o0ohbF8sI/DNO90mkWI=")
	g.Expect(err).NotTo(HaveOccurred())
	key, err := ecdh.X25519().NewPrivateKey(raw)
	g.Expect(err).NotTo(HaveOccurred())
	const sealed = "v1.A5vdAYAQSZXtX/Y+Ckb57qDgUP2TvuauSrXrctc0hEci6LziMKiY6hIbGZ2emouUuwHj+CWqfBQSj10RanXkW5g8ZmGSXa1OdzRtSg1+HN14V5OOp4j/3Y4Rmh3S3IiZrjBoF9ZSx+RIe/BgZmncSYAhfLL+OM7Z7G2qBlKA4rZPXvwttKyemU4RXoxOLFbgxZnnD7Bp49/XgT+iVh9O6Y2G"
	cred, err := registration.Open(key, "fleet-default", "request-1", sealed)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cred).To(Equal(registration.SealedCredential{Token: "a-token", ClusterName: "edge-1", ClusterNamespace: "cluster-ns", Namespace: "fleet-default"}))
	_, err = registration.Open(key, "fleet-default", "request-2", sealed)
	g.Expect(err).To(MatchError(ContainSubstring("not sealed for this request")))
}
