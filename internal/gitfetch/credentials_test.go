package gitfetch_test

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/gitfetch"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/internal/outcome"
)

// A personal access token is the password of a basic-auth Secret, with or
// without a user name, as Fleet's documentation has it.
func TestTokenAuth(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	root := t.TempDir()
	repo := newRepo(t, g, root, "src")
	first := commit(g, repo, map[string]string{"a.yaml": "one"})
	srv := gittest.NewServer(root)
	defer srv.Close()
	srv.SetToken("glpat-s3cret")
	f := &gitfetch.Fetcher{CacheDir: filepath.Join(root, "cache")}
	token := func(data map[string]string) *corev1.Secret {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "token"}, Type: corev1.SecretTypeBasicAuth, Data: map[string][]byte{}}
		for k, v := range data {
			s.Data[k] = []byte(v)
		}
		return s
	}
	for _, s := range []*corev1.Secret{token(map[string]string{"password": "glpat-s3cret"}), token(map[string]string{"username": "oauth2", "password": "glpat-s3cret"})} {
		o := gitfetch.Options{Key: "ns/r", URL: srv.RepoURL("src"), Secret: s}
		latest, err := f.LatestCommit(ctx, o)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(latest).To(Equal(first))
		dir, err := f.Checkout(ctx, o, latest)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(readFile(g, dir, "a.yaml")).To(Equal("one"))
	}
	_, err := f.LatestCommit(ctx, gitfetch.Options{Key: "ns/r", URL: srv.RepoURL("src"), Secret: token(map[string]string{"password": "revoked"})})
	g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonAuthFailed), "%v", err)
	_, err = f.LatestCommit(ctx, gitfetch.Options{Key: "ns/r", URL: srv.RepoURL("src"), Secret: token(map[string]string{"username": "oauth2"})})
	g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonInvalidOptions), "%v", err)
	g.Expect(err).To(MatchError(ContainSubstring(`has no "password" key`)))
}

// githubAPI is a small GitHub API on loopback: it mints installation tokens
// for one app installation, after checking the app's JWT with the app's
// public key, as api.github.com does.
type githubAPI struct {
	*httptest.Server
	t                     *testing.T
	appID, installationID string
	public                *rsa.PublicKey
	token                 string
	minted                atomic.Int64
}

func newGitHubAPI(t *testing.T, appID, installationID string, public *rsa.PublicKey, token string) *githubAPI {
	t.Helper()
	a := &githubAPI{t: t, appID: appID, installationID: installationID, public: public, token: token}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.Close)
	return a
}

func (a *githubAPI) serve(w http.ResponseWriter, r *http.Request) {
	var inst string
	if _, err := fmt.Sscanf(r.URL.Path, "/app/installations/%s", &inst); err != nil || r.Method != http.MethodPost || !strings.HasSuffix(inst, "/access_tokens") {
		http.NotFound(w, r)
		return
	}
	if err := a.checkJWT(strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")); err != nil {
		http.Error(w, `{"message":"`+err.Error()+`"}`, http.StatusUnauthorized)
		return
	}
	if strings.TrimSuffix(inst, "/access_tokens") != a.installationID {
		http.Error(w, `{"message":"Not Found"}`, http.StatusNotFound)
		return
	}
	a.minted.Add(1)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	if err := json.NewEncoder(w).Encode(map[string]string{"token": a.token, "expires_at": time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}); err != nil {
		a.t.Errorf("the GitHub API stand-in could not send the token: %v", err)
	}
}

func (a *githubAPI) checkJWT(jwt string) error {
	parts := strings.Split(jwt, ".")
	if len(parts) != 3 {
		return fmt.Errorf("not a JWT")
	}
	var header struct{ Alg string }
	var claims struct {
		Iss      string
		Iat, Exp int64
	}
	for i, into := range []interface{}{&header, &claims} {
		raw, err := base64.RawURLEncoding.DecodeString(parts[i])
		if err != nil {
			return err
		}
		if err := json.Unmarshal(raw, into); err != nil {
			return err
		}
	}
	sig, err := base64.RawURLEncoding.DecodeString(parts[2])
	if err != nil {
		return err
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if header.Alg != "RS256" || rsa.VerifyPKCS1v15(a.public, crypto.SHA256, sum[:], sig) != nil {
		return fmt.Errorf("A JSON web token could not be decoded")
	}
	now := time.Now().Unix()
	if claims.Iss != a.appID || claims.Iat > now || claims.Exp < now || claims.Exp-claims.Iat > 600 {
		return fmt.Errorf("bad claims")
	}
	return nil
}

// GitHub App credentials, as Fleet stores them, become an installation token
// minted by the GitHub API (here on loopback, the manager's GitHubAPIURL),
// which then clones a real repository served over HTTP.
func TestGitHubApp(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	root := t.TempDir()
	repo := newRepo(t, g, root, "org-repo")
	first := commit(g, repo, map[string]string{"app/cm.yaml": "one"})
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	g.Expect(err).NotTo(HaveOccurred())
	other, err := rsa.GenerateKey(rand.Reader, 2048)
	g.Expect(err).NotTo(HaveOccurred())
	api := newGitHubAPI(t, "123", "42", &key.PublicKey, "ghs_installation")
	srv := gittest.NewServer(root)
	defer srv.Close()
	srv.SetBasicAuth("x-access-token", "ghs_installation")
	f := &gitfetch.Fetcher{CacheDir: filepath.Join(root, "cache"), GitHubAPIURL: api.URL}
	appSecret := func(appID, installationID string, k *rsa.PrivateKey) *corev1.Secret {
		return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "app"}, Data: map[string][]byte{
			gitfetch.GitHubAppIDKey:             []byte(appID),
			gitfetch.GitHubAppInstallationIDKey: []byte(installationID),
			gitfetch.GitHubAppPrivateKeyKey:     pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)}),
		}}
	}
	o := gitfetch.Options{Key: "ns/app", URL: srv.RepoURL("org-repo"), Secret: appSecret("123", "42", key)}

	latest, err := f.LatestCommit(ctx, o)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(latest).To(Equal(first))
	dir, err := f.Checkout(ctx, o, latest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(readFile(g, dir, "app/cm.yaml")).To(Equal("one"))
	second := commit(g, repo, map[string]string{"app/cm.yaml": "two"})
	latest, err = f.LatestCommit(ctx, o)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(latest).To(Equal(second))
	g.Expect(api.minted.Load()).To(BeEquivalentTo(1), "the installation token is reused until it nears its expiry")

	for _, tc := range []struct {
		name   string
		secret *corev1.Secret
		reason string
		msg    string
	}{
		{"a key that is not the app's", appSecret("123", "42", other), fleet.ReasonAuthFailed, "refused GitHub App 123"},
		{"another app", appSecret("124", "42", key), fleet.ReasonAuthFailed, "refused GitHub App 124"},
		{"an installation that does not exist", appSecret("123", "7", key), fleet.ReasonAuthFailed, "has no installation 7 of GitHub App 123"},
		{"an app ID that is not a number", appSecret("my-app", "42", key), fleet.ReasonInvalidOptions, "github_app_id is not a number"},
		{"a key that is not PEM", func() *corev1.Secret {
			s := appSecret("123", "42", key)
			s.Data[gitfetch.GitHubAppPrivateKeyKey] = []byte("not a key")
			return s
		}(), fleet.ReasonInvalidOptions, "github_app_private_key is not the app's PEM RSA private key"},
		{"a key missing", func() *corev1.Secret {
			s := appSecret("123", "42", key)
			delete(s.Data, gitfetch.GitHubAppInstallationIDKey)
			return s
		}(), fleet.ReasonInvalidOptions, "no github_app_installation_id"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := f.LatestCommit(ctx, gitfetch.Options{Key: "ns/app", URL: srv.RepoURL("org-repo"), Secret: tc.secret})
			g.Expect(outcome.ReasonOf(err, "")).To(Equal(tc.reason), "%v", err)
			g.Expect(err).To(MatchError(ContainSubstring(tc.msg)))
		})
	}

	// Without the manager's GitHubAPIURL, the token comes from
	// https://api.<repository host>, as in Fleet; that host does not answer
	// here, which is a transient error naming it.
	plain := &gitfetch.Fetcher{CacheDir: filepath.Join(root, "cache2")}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = plain.LatestCommit(cctx, gitfetch.Options{Key: "ns/app", URL: "https://git.invalid/org/repo.git", Secret: appSecret("123", "42", key)})
	g.Expect(err).To(MatchError(ContainSubstring("https://api.git.invalid")))
	g.Expect(outcome.IsStalling(err)).To(BeFalse())
}
