package sealing

import (
	"crypto/ecdh"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
)

const secretValue = "s3cr3t-value-never-in-plain-text"

func payload() Payload {
	return Payload{Resources: []Resource{
		{Kind: "Secret", Name: "db", Type: "Opaque", Data: map[string][]byte{"password": []byte(secretValue)}},
		{Kind: "ConfigMap", Name: "cfg", StringData: map[string]string{"mode": "prod"}},
	}}
}

func TestSealOpens(t *testing.T) {
	g := NewWithT(t)
	agent, err := NewKey()
	g.Expect(err).NotTo(HaveOccurred())
	sealed, err := Seal(agent.PublicKey(), "cluster-ns-a", "bd-1", payload())
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(sealed).NotTo(ContainSubstring(secretValue))
	g.Expect(sealed).NotTo(ContainSubstring("prod"))

	got, err := Open([]*ecdh.PrivateKey{agent}, "cluster-ns-a", "bd-1", sealed)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(payload()))

	// With the previous key first, as after a rotation: the current one opens.
	previous, err := NewKey()
	g.Expect(err).NotTo(HaveOccurred())
	got, err = Open([]*ecdh.PrivateKey{previous, agent}, "cluster-ns-a", "bd-1", sealed)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(payload()))
}

func TestSealRefusesOthers(t *testing.T) {
	g := NewWithT(t)
	agentA, err := NewKey()
	g.Expect(err).NotTo(HaveOccurred())
	agentB, err := NewKey()
	g.Expect(err).NotTo(HaveOccurred())
	sealed, err := Seal(agentA.PublicKey(), "cluster-ns-a", "bd-1", payload())
	g.Expect(err).NotTo(HaveOccurred())

	for _, tc := range []struct {
		what      string
		key       *ecdh.PrivateKey
		namespace string
		bd        string
		sealed    string
	}{
		{"another agent's key", agentB, "cluster-ns-a", "bd-1", sealed},
		{"copied into another cluster namespace", agentA, "cluster-ns-b", "bd-1", sealed},
		{"copied to another BundleDeployment", agentA, "cluster-ns-a", "bd-2", sealed},
		{"tampered", agentA, "cluster-ns-a", "bd-1", sealed[:len(sealed)-8] + "AAAAAAA="},
		{"unknown version", agentA, "cluster-ns-a", "bd-1", "v9." + strings.TrimPrefix(sealed, "v1.")},
		{"truncated", agentA, "cluster-ns-a", "bd-1", "v1.AAAA"},
	} {
		t.Run(tc.what, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Open([]*ecdh.PrivateKey{tc.key}, tc.namespace, tc.bd, tc.sealed)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).NotTo(ContainSubstring(secretValue))
		})
	}
}

func TestKeysRoundTrip(t *testing.T) {
	g := NewWithT(t)
	k, err := NewKey()
	g.Expect(err).NotTo(HaveOccurred())
	back, err := ParsePrivateKey(EncodePrivateKey(k))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(back.Equal(k)).To(BeTrue())
	pub, err := ParsePublicKey(EncodePublicKey(k.PublicKey()))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(Fingerprint(pub)).To(Equal(Fingerprint(k.PublicKey())))
	_, err = ParsePublicKey("")
	g.Expect(err).To(MatchError(ContainSubstring("has not published")))
	_, err = ParsePublicKey("bm90IGEga2V5")
	g.Expect(err).To(MatchError(ContainSubstring("not an X25519")))
}
