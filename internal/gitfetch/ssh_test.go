package gitfetch_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/gitfetch"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/internal/outcome"
)

// sshClientKey makes a client key pair: the Secret's private key (PEM) and
// the public key the server authorizes.
func sshClientKey(g *WithT) ([]byte, ssh.PublicKey) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	block, err := ssh.MarshalPrivateKey(priv, "")
	g.Expect(err).NotTo(HaveOccurred())
	sshPub, err := ssh.NewPublicKey(pub)
	g.Expect(err).NotTo(HaveOccurred())
	return pem.EncodeToMemory(block), sshPub
}

// Fetching over SSH from a real SSH server on loopback, which runs git's
// git-upload-pack: the fetch succeeds when known_hosts (the Secret's, or
// the known-hosts ConfigMap's passed as Options.KnownHosts) holds the
// server's key, and is refused, before any git command runs, when the key
// differs or no entry matches the host.
func TestSSHFetchChecksTheHostKey(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	root := t.TempDir()
	repo := newRepo(t, g, root, "app")
	sha := commit(g, repo, map[string]string{"cm.yaml": "kind: ConfigMap\n"})
	private, public := sshClientKey(g)
	srv, err := gittest.NewSSHServer(root, public)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(srv.Close)

	// An impostor: the same address in known_hosts, another key.
	otherPub, _, err := ed25519.GenerateKey(rand.Reader)
	g.Expect(err).NotTo(HaveOccurred())
	otherKey, err := ssh.NewPublicKey(otherPub)
	g.Expect(err).NotTo(HaveOccurred())
	mismatch := knownhosts.Line([]string{knownhosts.Normalize(srv.Addr)}, otherKey) + "\n"
	// Only other hosts listed (as in the shipped ConfigMap).
	unknown := knownhosts.Line([]string{"github.com"}, srv.HostKey) + "\n"
	good := srv.KnownHostsLine() + "\n"

	secret := func(knownHosts string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ssh"}, Type: corev1.SecretTypeSSHAuth,
			Data: map[string][]byte{corev1.SSHAuthPrivateKey: private}}
		if knownHosts != "" {
			s.Data[gitfetch.KnownHostsKey] = []byte(knownHosts)
		}
		return s
	}
	for _, tc := range []struct {
		name      string
		secret    *corev1.Secret
		configMap string
		wantErr   []string
	}{
		{name: "the Secret's known_hosts holds the key", secret: secret(good)},
		{name: "the ConfigMap's known_hosts holds the key", secret: secret(""), configMap: good},
		{name: "the Secret's key differs", secret: secret(mismatch), configMap: good,
			wantErr: []string{"host key verification failed for " + srv.RepoURL("app"), "knownhosts: key mismatch"}},
		{name: "the ConfigMap's key differs", secret: secret(""), configMap: mismatch,
			wantErr: []string{"host key verification failed for " + srv.RepoURL("app"), "knownhosts: key mismatch"}},
		{name: "no entry for the host", secret: secret(""), configMap: unknown,
			wantErr: []string{"host key verification failed for " + srv.RepoURL("app"), "knownhosts: key is unknown"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			f := &gitfetch.Fetcher{CacheDir: t.TempDir(), ListTimeout: 20 * time.Second, FetchTimeout: 20 * time.Second}
			o := gitfetch.Options{Key: "ns/ssh", URL: srv.RepoURL("app"), Secret: tc.secret, KnownHosts: []byte(tc.configMap)}
			before := srv.Fetches()
			latest, err := f.LatestCommit(ctx, o)
			if len(tc.wantErr) > 0 {
				g.Expect(err).To(HaveOccurred())
				for _, want := range tc.wantErr {
					g.Expect(err.Error()).To(ContainSubstring(want))
				}
				g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonHostKey))
				g.Expect(srv.Fetches()).To(Equal(before), "nothing is asked of a server whose key is not trusted")
				_, err = f.Checkout(ctx, o, sha)
				g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonHostKey), "%v", err)
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(latest).To(Equal(sha))
			dir, err := f.Checkout(ctx, o, latest)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(readFile(g, dir, "cm.yaml")).To(Equal("kind: ConfigMap\n"))
			g.Expect(srv.Fetches()).To(BeNumerically(">=", before+2), "listed and fetched over SSH")
		})
	}

	// The server checks the client too: another client key is refused as
	// an authentication failure, not a host key one.
	otherPrivate, _ := sshClientKey(g)
	s := secret(good)
	s.Data[corev1.SSHAuthPrivateKey] = otherPrivate
	f := &gitfetch.Fetcher{CacheDir: t.TempDir(), ListTimeout: 20 * time.Second}
	_, err = f.LatestCommit(ctx, gitfetch.Options{Key: "ns/ssh", URL: srv.RepoURL("app"), Secret: s})
	g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonAuthFailed), "%v", err)
}
