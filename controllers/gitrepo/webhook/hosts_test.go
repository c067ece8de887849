package webhook_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/gitrepo/webhook"
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
		name: webhook.HostGitHub,
		payload: func(url, commit string) any {
			return map[string]any{"ref": "refs/heads/main", "after": commit, "repository": map[string]any{"clone_url": url, "default_branch": "main"}}
		},
		sign: func(req *http.Request, body []byte, secret string) {
			req.Header.Set("X-GitHub-Event", "push")
			req.Header.Set("X-Hub-Signature-256", "sha256="+hmacHex(secret, body))
		},
	},
	{
		name: webhook.HostGitLab,
		payload: func(url, commit string) any {
			return map[string]any{"ref": "refs/heads/main", "checkout_sha": commit, "project": map[string]any{"git_http_url": url, "default_branch": "main"}}
		},
		sign: func(req *http.Request, _ []byte, secret string) {
			req.Header.Set("X-Gitlab-Event", "Push Hook")
			req.Header.Set("X-Gitlab-Token", secret)
		},
	},
	{
		name: webhook.HostBitbucket,
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
		name: webhook.HostBitbucketServer,
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
		name: webhook.HostGogs,
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
		name: webhook.HostAzureDevOps,
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
// key of the webhookSecret records the pushed commit in the GitRepo's
// status.webhookCommit, which makes the GitRepo controller fetch it at once;
// deliveries signed with another host's key, or with a guess, are refused
// with 401 and record nothing.
func TestWebhookHosts(t *testing.T) {
	g := NewWithT(t)
	nsObj, err := env.CreateNamespace(ctx, "webhook")
	g.Expect(err).NotTo(HaveOccurred())
	ns := nsObj.Name
	keys := map[string]string{
		webhook.HostGitHub: "github-key", webhook.HostGitLab: "gitlab-key", webhook.HostBitbucket: "{6f1c8e0a-bitbucket-uuid}",
		webhook.HostBitbucketServer: "bitbucket-server-key", webhook.HostGogs: "gogs-key",
	}
	data := map[string][]byte{
		webhook.SecretKey:        []byte("shared-token"),
		webhook.AzureUsernameKey: []byte("fleet-hook"),
		webhook.AzurePasswordKey: []byte("azure-password"),
	}
	for k, v := range keys {
		data[k] = []byte(v)
	}
	keys[webhook.HostAzureDevOps] = "azure-password"
	g.Expect(env.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hooks"}, Data: data})).To(Succeed())
	url := "https://git.example/" + ns + "/hosts"
	hooked := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hooked"},
		Spec: fleet.GitRepoSpec{Repo: url, Branch: "main", WebhookSecret: "hooks"}}
	g.Expect(env.CreateAndWait(ctx, hooked)).To(Succeed())
	webhookCommit := func() string {
		gr := &fleet.GitRepo{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(hooked), gr)).To(Succeed())
		return gr.Status.WebhookCommit
	}

	deliver := func(h webhookHost, commit, secret string) (int, webhook.Response) {
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
		var out webhook.Response
		g.Expect(json.Unmarshal(raw, &out)).To(Succeed(), string(raw))
		return resp.StatusCode, out
	}

	for i, h := range webhookHosts {
		t.Logf("%s: forged deliveries are refused, the signed one is recorded", h.name)
		pushed := newCommit(g)
		other := webhookHosts[(i+1)%len(webhookHosts)].name
		for why, secret := range map[string]string{"another host's key (" + other + ")": keys[other], "a guess": "guessed-secret"} {
			code, resp := deliver(h, pushed, secret)
			g.Expect(code).To(Equal(http.StatusUnauthorized), "%s signed with %s", h.name, why)
			g.Expect(resp.Triggered).To(BeZero())
			g.Expect(resp.Rejected).NotTo(BeEmpty())
		}
		g.Expect(webhookCommit()).NotTo(Equal(pushed), "%s: a refused delivery records no commit", h.name)

		code, resp := deliver(h, pushed, keys[h.name])
		g.Expect(code).To(Equal(http.StatusOK), "%s: %+v", h.name, resp)
		g.Expect(resp.Triggered).To(Equal(1))
		g.Expect(resp.Commit).To(Equal(pushed))
		g.Expect(webhookCommit()).To(Equal(pushed), "%s: the signed delivery records the pushed commit", h.name)
	}

	t.Log("the shared token does not stand in for a host that has its own key")
	pushed := newCommit(g)
	code, _ := deliver(webhookHosts[0], pushed, "shared-token")
	g.Expect(code).To(Equal(http.StatusUnauthorized))
	g.Expect(webhookCommit()).NotTo(Equal(pushed))
}

// newCommit returns a random full SHA-1 object name, as a push names one.
func newCommit(g *WithT) string {
	b := make([]byte, 20)
	_, err := rand.Read(b)
	g.Expect(err).NotTo(HaveOccurred())
	return hex.EncodeToString(b)
}
