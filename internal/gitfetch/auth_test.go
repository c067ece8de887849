package gitfetch

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"net"
	"strconv"
	"testing"

	"github.com/go-git/go-git/v5/plumbing/transport"
	gitssh "github.com/go-git/go-git/v5/plumbing/transport/ssh"
	. "github.com/onsi/gomega"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

func hostKey(g *WithT) ssh.PublicKey {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	k, err := ssh.NewPublicKey(pub)
	g.Expect(err).NotTo(HaveOccurred())
	return k
}

// No SSH server runs in these tests: host key checking is tested on the
// callback go-git's SSH transport calls with the key the server shows,
// against known_hosts built here, from the Secret or from the fallback
// (Fleet's known-hosts ConfigMap).
func TestSSHHostKeyChecking(t *testing.T) {
	g := NewWithT(t)
	good, bad := hostKey(g), hostKey(g)
	_, clientKey, err := ed25519.GenerateKey(rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	block, err := ssh.MarshalPrivateKey(clientKey, "")
	g.Expect(err).NotTo(HaveOccurred())
	privatePEM := pemEncode(block.Type, block.Bytes)
	knownHosts := []byte(knownhosts.Line([]string{"git.example.com", "[git.example.com]:2222"}, good) + "\n")

	secret := func(kh []byte) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ssh"}, Type: corev1.SecretTypeSSHAuth,
			Data: map[string][]byte{corev1.SSHAuthPrivateKey: privatePEM}}
		if kh != nil {
			s.Data[KnownHostsKey] = kh
		}
		return s
	}
	for _, tc := range []struct {
		name     string
		url      string
		secret   *corev1.Secret
		fallback []byte
		host     string
		port     int
		key      ssh.PublicKey
		wantErr  string
	}{
		{name: "the Secret's known_hosts, right key", url: "git@git.example.com:org/repo.git", secret: secret(knownHosts), host: "git.example.com", port: 22, key: good},
		{name: "the Secret's known_hosts, other port", url: "ssh://git@git.example.com:2222/org/repo.git", secret: secret(knownHosts), host: "git.example.com", port: 2222, key: good},
		{name: "a key that changed", url: "git@git.example.com:org/repo.git", secret: secret(knownHosts), host: "git.example.com", port: 22, key: bad, wantErr: "knownhosts: key mismatch"},
		{name: "a host not listed", url: "git@other.example.com:org/repo.git", secret: secret(knownHosts), host: "other.example.com", port: 22, key: good, wantErr: "knownhosts: key is unknown"},
		{name: "the fallback when the Secret has none", url: "git@git.example.com:org/repo.git", secret: secret(nil), fallback: knownHosts, host: "git.example.com", port: 22, key: good},
		{name: "the fallback checks too", url: "git@git.example.com:org/repo.git", secret: secret(nil), fallback: knownHosts, host: "git.example.com", port: 22, key: bad, wantErr: "knownhosts: key mismatch"},
		{name: "the Secret wins over the fallback", url: "git@git.example.com:org/repo.git", secret: secret([]byte(knownhosts.Line([]string{"git.example.com"}, bad) + "\n")), fallback: knownHosts, host: "git.example.com", port: 22, key: good, wantErr: "knownhosts: key mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ep, err := transport.NewEndpoint(tc.url)
			g.Expect(err).NotTo(HaveOccurred())
			auth, err := sshAuth(ep, tc.url, tc.secret, tc.fallback)
			g.Expect(err).NotTo(HaveOccurred())
			pk, ok := auth.(*gitssh.PublicKeys)
			g.Expect(ok).To(BeTrue())
			// The configuration go-git's SSH transport dials with.
			cfg, err := pk.ClientConfig()
			g.Expect(err).NotTo(HaveOccurred())
			cb := cfg.HostKeyCallback
			addr := net.JoinHostPort(tc.host, itoa(tc.port))
			err = cb(addr, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: tc.port}, tc.key)
			if tc.wantErr == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			g.Expect(outcome.ReasonOf(classify(tc.url, "listing the refs of", err), "")).To(Equal(fleet.ReasonHostKey))
		})
	}

	// Neither the Secret nor the fallback: refused before connecting.
	ep, err := transport.NewEndpoint("git@git.example.com:org/repo.git")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = sshAuth(ep, "git@git.example.com:org/repo.git", secret(nil), nil)
	g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonHostKey))
	g.Expect(err).To(MatchError(ContainSubstring("known-hosts ConfigMap")))
}

func TestGitHubAPIURL(t *testing.T) {
	g := NewWithT(t)
	f := &Fetcher{}
	g.Expect(f.gitHubAPIURL("github.com")).To(Equal("https://api.github.com"))
	g.Expect(f.gitHubAPIURL("api.example.ghe.com")).To(Equal("https://api.example.ghe.com"))
	f.GitHubAPIURL = "http://127.0.0.1:1234/"
	g.Expect(f.gitHubAPIURL("github.com")).To(Equal("http://127.0.0.1:1234"))
}

func pemEncode(typ string, b []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: b})
}

func itoa(i int) string { return strconv.Itoa(i) }
