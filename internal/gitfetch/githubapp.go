package gitfetch

import (
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	corev1 "k8s.io/api/core/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/egress"
	"github.com/gitfleet/fleet/internal/outcome"
)

// The keys of a clientSecretName Secret holding GitHub App credentials, as
// Fleet names them. With them the manager authenticates as an installation of
// the app: it mints an installation token with the app's private key and
// uses it as the password of user x-access-token.
const (
	GitHubAppIDKey             = "github_app_id"
	GitHubAppInstallationIDKey = "github_app_installation_id"
	GitHubAppPrivateKeyKey     = "github_app_private_key"
)

// gitHubAppUser is the user name GitHub expects with an installation token.
const gitHubAppUser = "x-access-token"

// tokenRenewBefore is how long before its expiry a cached installation token
// is replaced (GitHub's last an hour).
const tokenRenewBefore = 5 * time.Minute

// isGitHubApp tells whether secret holds GitHub App credentials.
func isGitHubApp(secret *corev1.Secret) bool {
	_, id := secret.Data[GitHubAppIDKey]
	_, inst := secret.Data[GitHubAppInstallationIDKey]
	_, key := secret.Data[GitHubAppPrivateKeyKey]
	return id || inst || key
}

// gitHubApp is the parsed content of a GitHub App Secret.
type gitHubApp struct {
	appID, installationID int64
	key                   *rsa.PrivateKey
	keySum                [32]byte
}

func parseGitHubApp(secret *corev1.Secret) (*gitHubApp, error) {
	for _, k := range []string{GitHubAppIDKey, GitHubAppInstallationIDKey, GitHubAppPrivateKeyKey} {
		if len(secret.Data[k]) == 0 {
			return nil, outcome.Stallf(fleet.ReasonInvalidOptions,
				"Secret %s has GitHub App credentials but no %s: a GitHub App Secret needs %s, %s and %s",
				secret.Name, k, GitHubAppIDKey, GitHubAppInstallationIDKey, GitHubAppPrivateKeyKey)
		}
	}
	app := &gitHubApp{}
	var err error
	if app.appID, err = strconv.ParseInt(strings.TrimSpace(string(secret.Data[GitHubAppIDKey])), 10, 64); err != nil {
		return nil, outcome.Stallf(fleet.ReasonInvalidOptions, "Secret %s: %s is not a number: use the app's numeric ID", secret.Name, GitHubAppIDKey)
	}
	if app.installationID, err = strconv.ParseInt(strings.TrimSpace(string(secret.Data[GitHubAppInstallationIDKey])), 10, 64); err != nil {
		return nil, outcome.Stallf(fleet.ReasonInvalidOptions, "Secret %s: %s is not a number: use the installation's numeric ID", secret.Name, GitHubAppInstallationIDKey)
	}
	pemData := secret.Data[GitHubAppPrivateKeyKey]
	if app.key, err = parseRSAKey(pemData); err != nil {
		return nil, outcome.Stallf(fleet.ReasonInvalidOptions,
			"Secret %s: %s is not the app's PEM RSA private key (%v): paste the .pem file GitHub generated", secret.Name, GitHubAppPrivateKeyKey, err)
	}
	app.keySum = sha256.Sum256(pemData)
	return app, nil
}

func parseRSAKey(pemData []byte) (*rsa.PrivateKey, error) {
	block, _ := pem.Decode(pemData)
	if block == nil {
		return nil, fmt.Errorf("no PEM block")
	}
	if k, err := x509.ParsePKCS1PrivateKey(block.Bytes); err == nil {
		return k, nil
	}
	k, err := x509.ParsePKCS8PrivateKey(block.Bytes)
	if err != nil {
		return nil, err
	}
	rk, ok := k.(*rsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("a %T, not an RSA key", k)
	}
	return rk, nil
}

// gitHubAPIURL is where the installation tokens of an app for repository
// host come from: the Fetcher's GitHubAPIURL, else, as Fleet derives it,
// https://api.<host> (api.github.com for github.com).
func (f *Fetcher) gitHubAPIURL(host string) string {
	if f.GitHubAPIURL != "" {
		return strings.TrimSuffix(f.GitHubAPIURL, "/")
	}
	if strings.HasPrefix(host, "api.") {
		return "https://" + host
	}
	return "https://api." + host
}

type tokenKey struct {
	api                   string
	appID, installationID int64
	keySum                [32]byte
}

type cachedToken struct {
	token   string
	expires time.Time
}

// gitHubAppAuth returns the credentials of an installation token of the app
// in secret, minted or cached.
func (f *Fetcher) gitHubAppAuth(ctx context.Context, secret *corev1.Secret, host string, caBundle []byte) (*githttp.BasicAuth, error) {
	app, err := parseGitHubApp(secret)
	if err != nil {
		return nil, err
	}
	key := tokenKey{api: f.gitHubAPIURL(host), appID: app.appID, installationID: app.installationID, keySum: app.keySum}
	now := time.Now()
	f.mu.Lock()
	t, ok := f.tokens[key]
	f.mu.Unlock()
	if !ok || now.Add(tokenRenewBefore).After(t.expires) {
		if t, err = mintInstallationToken(ctx, key.api, app, caBundle, now); err != nil {
			return nil, err
		}
		f.mu.Lock()
		if f.tokens == nil {
			f.tokens = map[tokenKey]cachedToken{}
		}
		for k, old := range f.tokens {
			if now.After(old.expires) {
				delete(f.tokens, k)
			}
		}
		f.tokens[key] = t
		f.mu.Unlock()
	}
	return &githttp.BasicAuth{Username: gitHubAppUser, Password: t.token}, nil
}

// mintInstallationToken asks the GitHub API at api for a token of the app's
// installation, authenticating with a JWT signed by the app's key.
func mintInstallationToken(ctx context.Context, api string, app *gitHubApp, caBundle []byte, now time.Time) (cachedToken, error) {
	jwt, err := appJWT(app, now)
	if err != nil {
		return cachedToken{}, err
	}
	url := fmt.Sprintf("%s/app/installations/%d/access_tokens", api, app.installationID)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, nil)
	if err != nil {
		return cachedToken{}, outcome.Stallf(fleet.ReasonInvalidOptions, "GitHub API URL %s: %w", api, err)
	}
	req.Header.Set("Authorization", "Bearer "+jwt)
	req.Header.Set("Accept", "application/vnd.github+json")
	req.Header.Set("X-GitHub-Api-Version", "2022-11-28")
	client, err := apiClient(egress.FromContext(ctx), caBundle)
	if err != nil {
		return cachedToken{}, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return cachedToken{}, fmt.Errorf("asking %s for a GitHub App installation token: %w", api, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return cachedToken{}, fmt.Errorf("reading the GitHub App installation token from %s: %w", api, err)
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return cachedToken{}, outcome.Stallf(fleet.ReasonAuthFailed,
			"the GitHub API at %s refused GitHub App %d (%s): check %s and %s in clientSecretName", api, app.appID, resp.Status, GitHubAppIDKey, GitHubAppPrivateKeyKey)
	case resp.StatusCode == http.StatusNotFound:
		return cachedToken{}, outcome.Stallf(fleet.ReasonAuthFailed,
			"the GitHub API at %s has no installation %d of GitHub App %d: check %s in clientSecretName and that the app is installed", api, app.installationID, app.appID, GitHubAppInstallationIDKey)
	case resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK:
		return cachedToken{}, fmt.Errorf("the GitHub API at %s answered %s to a GitHub App installation token request", api, resp.Status)
	}
	var out struct {
		Token     string    `json:"token"`
		ExpiresAt time.Time `json:"expires_at"`
	}
	if err := json.Unmarshal(body, &out); err != nil || out.Token == "" {
		return cachedToken{}, fmt.Errorf("the GitHub API at %s answered no installation token (%v)", api, err)
	}
	if out.ExpiresAt.IsZero() {
		out.ExpiresAt = now.Add(time.Hour)
	}
	return cachedToken{token: out.Token, expires: out.ExpiresAt}, nil
}

// appJWT is the JSON Web Token that authenticates as the app itself: RS256,
// issued by the app ID, valid for nine minutes from a minute ago (GitHub
// allows ten, and clocks drift).
func appJWT(app *gitHubApp, now time.Time) (string, error) {
	enc := base64.RawURLEncoding
	header := enc.EncodeToString([]byte(`{"alg":"RS256","typ":"JWT"}`))
	claims, err := json.Marshal(map[string]interface{}{
		"iat": now.Add(-time.Minute).Unix(),
		"exp": now.Add(9 * time.Minute).Unix(),
		"iss": strconv.FormatInt(app.appID, 10),
	})
	if err != nil {
		return "", err
	}
	signed := header + "." + enc.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signed))
	sig, err := rsa.SignPKCS1v15(rand.Reader, app.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("signing the GitHub App JWT: %w", err)
	}
	return signed + "." + enc.EncodeToString(sig), nil
}

// apiClient trusts the system's CAs plus caBundle (the GitRepo's caBundle,
// which a GitHub Enterprise server's API shares with its git) and connects
// through dialer: the API host derives from the tenant's repository URL.
func apiClient(dialer *egress.Dialer, caBundle []byte) (*http.Client, error) {
	tr := dialer.Transport()
	if len(caBundle) > 0 {
		pool, err := x509.SystemCertPool()
		if err != nil || pool == nil {
			pool = x509.NewCertPool()
		}
		if !pool.AppendCertsFromPEM(caBundle) {
			return nil, outcome.Stallf(fleet.ReasonTLS, "caBundle holds no PEM certificate: fix spec.caBundle")
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &http.Client{Transport: tr}, nil
}
