package knownhosts_test

import (
	"net"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	"golang.org/x/crypto/ssh"
	xknownhosts "golang.org/x/crypto/ssh/knownhosts"

	"github.com/gitfleet/fleet/config/knownhosts"
)

// published are the SHA256 fingerprints each host publishes for its host
// keys: a key pasted wrong, or one a host has retired, fails here.
var published = map[string][]string{
	"github.com": { // docs.github.com: GitHub's SSH key fingerprints
		"SHA256:uNiVztksCsDhcc0u9e8BujQXVUpKZIDTMczCvj3tD2s", // RSA
		"SHA256:p2QAMXNIC1TJYWeIOttrVc98/R1BUFWu3/LiyKgUfQM", // ECDSA
		"SHA256:+DiY3wvvV6TuJJhbpZisF/zLDA0zPMSvHdkr4UvCOqU", // Ed25519
	},
	"gitlab.com": { // docs.gitlab.com: SSH host keys fingerprints
		"SHA256:ROQFvPThGrW4RuWLoL9tq9I9zJ42fK4XywyRtbOz/EQ", // RSA
		"SHA256:HbW3g8zUjNSksFbqTiUWPWg2Bq1x8xdGUrliXFzSnUw", // ECDSA
		"SHA256:eUXGGm1YGsMAS7vkcx6JOJdOGHPem5gQp4taiCfCLB8", // ED25519
	},
	"bitbucket.org": { // bitbucket.org/blog/ssh-host-key-changes (2023)
		"SHA256:46OSHA1Rmj8E8ERTC6xkNcmGOw9oFxYr0WF6zWW8l1E", // RSA
		"SHA256:FC73VB6C4OQLSCrjEayhMp9UMxS97caD/Yyi2bhW/J0", // ECDSA
		"SHA256:ybgmFkzwOSotHTHLJgHO0QN8L0xErw6vd0VhFA9m3SM", // ED25519
	},
	// learn.microsoft.com: Azure DevOps SSH, RSA only.
	"ssh.dev.azure.com":       {"SHA256:ohD8VZEXGWo6Ez8GSEJQ9WpafgLFsOfLOtGGQCQo6Og"},
	"vs-ssh.visualstudio.com": {"SHA256:ohD8VZEXGWo6Ez8GSEJQ9WpafgLFsOfLOtGGQCQo6Og"},
}

// Every entry parses, and the keys are exactly the published ones.
func TestPublishedFingerprints(t *testing.T) {
	g := NewWithT(t)
	got := map[string][]string{}
	keys := map[string][]ssh.PublicKey{}
	rest := []byte(knownhosts.Data)
	for {
		_, hosts, key, _, next, err := ssh.ParseKnownHosts(rest)
		if err != nil {
			g.Expect(err.Error()).To(Equal("EOF"), "every line of known_hosts parses")
			break
		}
		rest = next
		g.Expect(hosts).To(HaveLen(1), "one host per line")
		got[hosts[0]] = append(got[hosts[0]], ssh.FingerprintSHA256(key))
		keys[hosts[0]] = append(keys[hosts[0]], key)
	}
	g.Expect(got).To(HaveLen(len(published)))
	for host, want := range published {
		g.Expect(got[host]).To(ConsistOf(want), host)
	}

	// What the manager does with them: go-git's host key check reads them as
	// a known_hosts file; a published key is accepted on port 22, any other
	// key refused as a mismatch.
	file := filepath.Join(t.TempDir(), "known_hosts")
	g.Expect(os.WriteFile(file, []byte(knownhosts.Data), 0o600)).To(Succeed())
	check, err := xknownhosts.New(file)
	g.Expect(err).NotTo(HaveOccurred())
	addr := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 22}
	for host, ks := range keys {
		for _, k := range ks {
			g.Expect(check(host+":22", addr, k)).To(Succeed(), host)
		}
	}
	var keyErr *xknownhosts.KeyError
	err = check("github.com:22", addr, keys["gitlab.com"][0])
	g.Expect(err).To(BeAssignableToTypeOf(keyErr))
	g.Expect(err.(*xknownhosts.KeyError).Want).NotTo(BeEmpty(), "github.com is known: a mismatch, not an unknown host")
}
