package gitrepo_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/gitrepo"
)

func hmacHex(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return hex.EncodeToString(mac.Sum(nil))
}

// webhookHost is how one git host delivers a push: its payload and how it
// signs it with a secret.
type webhookHost struct {
	name    string
	payload func(url, commit string) any
	sign    func(req *http.Request, body []byte, secret string)
}

var webhookHosts = []webhookHost{
	{
		name: gitrepo.HostGitHub,
		payload: func(url, commit string) any {
			return map[string]any{"ref": "refs/heads/main", "after": commit, "repository": map[string]any{"clone_url": url, "default_branch": "main"}}
		},
		sign: func(req *http.Request, body []byte, secret string) {
			req.Header.Set("X-GitHub-Event", "push")
			req.Header.Set("X-Hub-Signature-256", "sha256="+hmacHex(secret, body))
		},
	},
	{
		name: gitrepo.HostGitLab,
		payload: func(url, commit string) any {
			return map[string]any{"ref": "refs/heads/main", "checkout_sha": commit, "project": map[string]any{"git_http_url": url, "default_branch": "main"}}
		},
		sign: func(req *http.Request, _ []byte, secret string) {
			req.Header.Set("X-Gitlab-Event", "Push Hook")
			req.Header.Set("X-Gitlab-Token", secret)
		},
	},
	{
		name: gitrepo.HostBitbucket,
		payload: func(url, commit string) any {
			return map[string]any{
				"push":       map[string]any{"changes": []any{map[string]any{"new": map[string]any{"type": "branch", "name": "main", "target": map[string]any{"hash": commit}}}}},
				"repository": map[string]any{"links": map[string]any{"html": map[string]any{"href": url}}},
			}
		},
		sign: func(req *http.Request, _ []byte, secret string) {
			req.Header.Set("X-Event-Key", "repo:push")
			req.Header.Set("X-Hook-UUID", secret)
		},
	},
	{
		name: gitrepo.HostBitbucketServer,
		payload: func(url, commit string) any {
			return map[string]any{
				"eventKey":   "repo:refs_changed",
				"changes":    []any{map[string]any{"refId": "refs/heads/main", "toHash": commit, "type": "UPDATE"}},
				"repository": map[string]any{"links": map[string]any{"clone": []any{map[string]any{"href": url, "name": "http"}}}},
			}
		},
		sign: func(req *http.Request, body []byte, secret string) {
			req.Header.Set("X-Event-Key", "repo:refs_changed")
			req.Header.Set("X-Hub-Signature", "sha256="+hmacHex(secret, body))
		},
	},
	{
		name: gitrepo.HostGogs,
		payload: func(url, commit string) any {
			return map[string]any{"ref": "refs/heads/main", "after": commit, "repository": map[string]any{"clone_url": url, "default_branch": "main"}}
		},
		sign: func(req *http.Request, body []byte, secret string) {
			// Gogs sends GitHub's event header too.
			req.Header.Set("X-Gogs-Event", "push")
			req.Header.Set("X-GitHub-Event", "push")
			req.Header.Set("X-Gogs-Signature", hmacHex(secret, body))
		},
	},
	{
		name: gitrepo.HostAzureDevOps,
		payload: func(url, commit string) any {
			return map[string]any{"eventType": "git.push", "resource": map[string]any{
				"refUpdates": []any{map[string]any{"name": "refs/heads/main", "newObjectId": commit}},
				"repository": map[string]any{"remoteUrl": url, "defaultBranch": "refs/heads/main"},
			}}
		},
		sign: func(req *http.Request, _ []byte, secret string) {
			req.Header.Set("X-Vss-ActivityId", "5a0c8c6e-0000-0000-0000-000000000000")
			req.SetBasicAuth("fleet-hook", secret)
		},
	},
}

// TestWebhookHosts: for each git host, a delivery signed with that host's
// key of the webhookSecret makes the controller fetch the pushed commit at
// once, despite an hour's polling interval; deliveries signed with another
// host's key, or with a guess, are refused with 401 and fetch nothing.
func TestWebhookHosts(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	name := ns + "-hosts"
	repo, first := newGitRepo(g, name, appFiles("web", "0"))
	keys := map[string]string{
		gitrepo.HostGitHub: "github-key", gitrepo.HostGitLab: "gitlab-key", gitrepo.HostBitbucket: "{6f1c8e0a-bitbucket-uuid}",
		gitrepo.HostBitbucketServer: "bitbucket-server-key", gitrepo.HostGogs: "gogs-key",
	}
	data := map[string][]byte{
		gitrepo.WebhookSecretKey:        []byte("shared-token"),
		gitrepo.WebhookAzureUsernameKey: []byte("fleet-hook"),
		gitrepo.WebhookAzurePasswordKey: []byte("azure-password"),
	}
	for k, v := range keys {
		data[k] = []byte(v)
	}
	keys[gitrepo.HostAzureDevOps] = "azure-password"
	g.Expect(env.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hooks"}, Data: data})).To(Succeed())
	url := gitServer.RepoURL(name)
	createGitRepo(g, ns, "hooked", fleet.GitRepoSpec{Repo: url, Branch: "main", PollingInterval: every(time.Hour), WebhookSecret: "hooks"})
	g.Eventually(bundleCommits(g, ns, "hooked"), eventually, poll).Should(Equal(map[string]string{"hooked-apps-web": first}))

	deliver := func(h webhookHost, commit, secret string) (int, gitrepo.WebhookResponse) {
		body, err := json.Marshal(h.payload(url, commit))
		g.Expect(err).NotTo(HaveOccurred())
		req, err := http.NewRequest(http.MethodPost, webhookURL, bytes.NewReader(body))
		g.Expect(err).NotTo(HaveOccurred())
		req.Header.Set("Content-Type", "application/json")
		h.sign(req, body, secret)
		resp, err := http.DefaultClient.Do(req)
		g.Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		g.Expect(err).NotTo(HaveOccurred())
		var out gitrepo.WebhookResponse
		g.Expect(json.Unmarshal(raw, &out)).To(Succeed(), string(raw))
		return resp.StatusCode, out
	}

	current := first
	for i, h := range webhookHosts {
		t.Logf("%s: forged deliveries are refused, the signed one is fetched", h.name)
		pushed := commit(g, repo, appFiles("web", h.name))
		other := webhookHosts[(i+1)%len(webhookHosts)].name
		for why, secret := range map[string]string{"another host's key (" + other + ")": keys[other], "a guess": "guessed-secret"} {
			code, resp := deliver(h, pushed, secret)
			g.Expect(code).To(Equal(http.StatusUnauthorized), "%s signed with %s", h.name, why)
			g.Expect(resp.Triggered).To(BeZero())
			g.Expect(resp.Rejected).NotTo(BeEmpty())
		}
		g.Consistently(func() string { return getGitRepo(g, ns, "hooked")().Status.WebhookCommit }, time.Second, 100*time.Millisecond).
			ShouldNot(Equal(pushed), "%s: a refused delivery records no commit", h.name)
		g.Expect(bundleCommits(g, ns, "hooked")()).To(Equal(map[string]string{"hooked-apps-web": current}), "%s: a refused delivery fetches nothing", h.name)

		code, resp := deliver(h, pushed, keys[h.name])
		g.Expect(code).To(Equal(http.StatusOK), "%s: %+v", h.name, resp)
		g.Expect(resp.Triggered).To(Equal(1))
		g.Eventually(bundleCommits(g, ns, "hooked"), 5*time.Second, 50*time.Millisecond).Should(
			Equal(map[string]string{"hooked-apps-web": pushed}), "%s: the signed delivery makes the controller fetch the pushed commit", h.name)
		g.Eventually(getGitRepo(g, ns, "hooked"), eventually, poll).Should(HaveField("Status.Commit", pushed))
		current = pushed
	}

	t.Log("the shared token does not stand in for a host that has its own key")
	pushed := commit(g, repo, appFiles("web", "shared"))
	code, _ := deliver(webhookHosts[0], pushed, "shared-token")
	g.Expect(code).To(Equal(http.StatusUnauthorized))
}
