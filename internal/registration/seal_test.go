package registration_test

import (
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
