package gitfetch_test

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/egress"
	"github.com/gitfleet/fleet/internal/gitfetch"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/internal/outcome"
)

// The Fetcher connects through its Dialer: a repository over HTTP or SSH,
// and the GitHub API, on an address the policy refuses (loopback, by
// default) are never contacted; the same servers are reached once the
// policy allows loopback.
func TestFetcherConnectsUnderItsPolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	root := t.TempDir()
	repo := newRepo(t, g, root, "app")
	sha := commit(g, repo, map[string]string{"cm.yaml": "kind: ConfigMap\n"})

	var httpHits atomic.Int64
	git := gittest.NewServer(root)
	defer git.Close()
	front := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		httpHits.Add(1)
		git.ServeHTTP(w, r)
	}))
	defer front.Close()

	private, public := sshClientKey(g)
	sshSrv, err := gittest.NewSSHServer(root, public)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(sshSrv.Close)
	sshSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ssh"}, Type: corev1.SecretTypeSSHAuth,
		Data: map[string][]byte{corev1.SSHAuthPrivateKey: private, gitfetch.KnownHostsKey: []byte(sshSrv.KnownHostsLine() + "\n")}}

	key, err := rsa.GenerateKey(rand.Reader, 2048)
	g.Expect(err).NotTo(HaveOccurred())
	api := newGitHubAPI(t, "123", "42", &key.PublicKey, "ghs_installation")
	appSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string][]byte{
		gitfetch.GitHubAppIDKey:             []byte("123"),
		gitfetch.GitHubAppInstallationIDKey: []byte("42"),
		gitfetch.GitHubAppPrivateKeyKey:     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}),
	}}

	fetcher := func(p egress.Policy) *gitfetch.Fetcher {
		return &gitfetch.Fetcher{CacheDir: t.TempDir(), ListTimeout: 20 * time.Second, FetchTimeout: 20 * time.Second,
			GitHubAPIURL: api.URL, Dialer: egress.NewDialer(p)}
	}
	cases := map[string]gitfetch.Options{
		"http":       {Key: "ns/http", URL: front.URL + "/app"},
		"ssh":        {Key: "ns/ssh", URL: sshSrv.RepoURL("app"), Secret: sshSecret},
		"github app": {Key: "ns/app", URL: front.URL + "/app", Secret: appSecret},
	}
	for name, o := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			refusing := fetcher(egress.Policy{})
			_, err := refusing.LatestCommit(ctx, o)
			g.Expect(errors.Is(err, egress.ErrRefused)).To(BeTrue(), "%v", err)
			g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonDestinationRefused))
			_, err = refusing.Checkout(ctx, o, sha)
			g.Expect(errors.Is(err, egress.ErrRefused)).To(BeTrue(), "%v", err)
			g.Expect(httpHits.Load()).To(BeZero())
			g.Expect(sshSrv.Fetches()).To(BeZero())
			g.Expect(api.minted.Load()).To(BeZero())
		})
	}
	for name, o := range cases {
		t.Run(name+" allowed", func(t *testing.T) {
			g := NewWithT(t)
			allowing := fetcher(egress.AllowLoopback())
			latest, err := allowing.LatestCommit(ctx, o)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(latest).To(Equal(sha))
			dir, err := allowing.Checkout(ctx, o, latest)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(readFile(g, dir, "cm.yaml")).To(Equal("kind: ConfigMap\n"))
		})
	}
}
