package badinput

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/gitrepo/webhook"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
)

// webhookCase is one call to the manager's webhook server.
type webhookCase struct {
	method  string
	headers map[string]string
	// sign, when set, gives the X-Hub-Signature-256 header for the body.
	sign func(body []byte) string
	body func() []byte
	code int
	msg  string
	// rejected and failed: substrings of the response's lists.
	rejected, failed string
}

// pushFor is a GitHub push of a new commit to the main branch of a repository
// on the git server.
func (f *fixture) pushFor(repo string) []byte {
	b, err := json.Marshal(map[string]any{
		"ref": "refs/heads/main", "after": strings.Repeat("ab", 20),
		"repository": map[string]any{"clone_url": f.gitServer.RepoURL(repo) + ".git", "html_url": f.gitServer.RepoURL(repo), "default_branch": "main"},
	})
	Expect(err).NotTo(HaveOccurred())
	return b
}

func (f *fixture) gitlabPushFor(repo string) []byte {
	b, err := json.Marshal(map[string]any{
		"ref": "refs/heads/main", "checkout_sha": strings.Repeat("cd", 20),
		"project": map[string]any{"git_http_url": f.gitServer.RepoURL(repo) + ".git", "default_branch": "main"},
	})
	Expect(err).NotTo(HaveOccurred())
	return b
}

func signature(secret string, body []byte) string {
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write(body)
	return "sha256=" + hex.EncodeToString(mac.Sum(nil))
}

func github(extra ...string) map[string]string {
	h := map[string]string{"X-GitHub-Event": "push", "Content-Type": "application/json"}
	for i := 0; i+1 < len(extra); i += 2 {
		h[extra[i]] = extra[i+1]
	}
	return h
}

func (f *fixture) healthyPush() []byte { return f.pushFor(healthyRepo) }

// The GitRepos of the webhook cases whose own configuration is broken.
func hookRepos() map[string]string {
	return map[string]string{
		"hook-missing-secret": "missing", // webhookSecret names no Secret
		"hook-keyless-secret": "keyless", // the Secret has no "token" key
	}
}

func (f *fixture) webhookSurface() {
	BeforeAll(func() {
		Expect(f.admin.Create(f.ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: "keyless"},
			Data: map[string][]byte{"secret": []byte("x")}})).To(Succeed())
		for name, secret := range hookRepos() {
			repo, err := gittest.NewRepo(filepath.Join(f.gitRoot, name), "main")
			must(err)
			_, err = repo.Commit("hook", app(""))
			must(err)
			Expect(f.admin.Create(f.ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ws}, Spec: fleet.GitRepoSpec{
				Repo: f.gitServer.RepoURL(name), Branch: "main", PollingInterval: every(time.Hour), WebhookSecret: secret,
			}})).To(Succeed())
		}
	})

	DescribeTable("a webhook call the manager refuses", func(c webhookCase) {
		method := c.method
		if method == "" {
			method = http.MethodPost
		}
		body := c.body()
		req, err := http.NewRequestWithContext(f.ctx, method, f.webhookURL, bytes.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		for k, v := range c.headers {
			req.Header.Set(k, v)
		}
		if c.sign != nil {
			req.Header.Set("X-Hub-Signature-256", c.sign(body))
		}
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		var out webhook.Response
		Expect(json.Unmarshal(raw, &out)).To(Succeed(), string(raw))
		Expect(resp.StatusCode).To(Equal(c.code), string(raw))
		Expect(out.Message).To(ContainSubstring(c.msg))
		Expect(out.Triggered).To(BeZero())
		if c.rejected != "" {
			Expect(out.Rejected).To(ContainElement(ContainSubstring(c.rejected)))
		}
		if c.failed != "" {
			Expect(out.Failed).To(ContainElement(ContainSubstring(c.failed)))
		}
		By("The webhook answers " + resp.Status + ": " + strings.TrimSpace(string(raw)))
		for name := range hookRepos() {
			Expect(f.getGitRepo(ws, name).Status.WebhookCommit).To(BeEmpty(), "GitRepo %s was not triggered", name)
		}
		f.expectUndisturbed()
	},
		Entry("a bad signature: 401", webhookCase{headers: github("X-Hub-Signature-256", "sha256="+strings.Repeat("00", 32)), body: f.healthyPush,
			code: http.StatusUnauthorized, msg: "signature verification failed",
			rejected: "X-Hub-Signature-256 does not match the webhook secret"}),
		Entry("no signature: 401", webhookCase{headers: github(), body: f.healthyPush,
			code: http.StatusUnauthorized, msg: "signature verification failed", rejected: "missing X-Hub-Signature-256 header"}),
		Entry("a signature made with another secret: 401", webhookCase{headers: github(), sign: func(b []byte) string { return signature("guessed", b) },
			body: f.healthyPush, code: http.StatusUnauthorized, msg: "signature verification failed", rejected: "does not match the webhook secret"}),
		Entry("a SHA-1 signature instead of SHA-256: 401", webhookCase{headers: github(), sign: func(b []byte) string {
			mac := hmac.New(sha1.New, []byte(f.webhookSecret))
			mac.Write(b)
			return "sha1=" + hex.EncodeToString(mac.Sum(nil))
		}, body: f.healthyPush, code: http.StatusUnauthorized, msg: "signature verification failed", rejected: "does not match"}),
		Entry("a valid signature of another body (replayed onto an altered payload): 401", webhookCase{
			headers: github(), sign: func([]byte) string { return signature(f.webhookSecret, f.pushFor("other")) }, body: f.healthyPush,
			code: http.StatusUnauthorized, msg: "signature verification failed", rejected: "does not match"}),
		Entry("a signature that is no hex: 401", webhookCase{headers: github("X-Hub-Signature-256", "sha256=not-hex"), body: f.healthyPush,
			code: http.StatusUnauthorized, msg: "signature verification failed", rejected: "does not match"}),
		Entry("a GitLab call with a wrong token: 401", webhookCase{headers: map[string]string{"X-Gitlab-Event": "Push Hook", "X-Gitlab-Token": "guessed"},
			body: func() []byte { return f.gitlabPushFor(healthyRepo) }, code: http.StatusUnauthorized, msg: "signature verification failed",
			rejected: "X-Gitlab-Token does not match the webhook secret"}),
		Entry("a GitLab call without token: 401", webhookCase{headers: map[string]string{"X-Gitlab-Event": "Push Hook"},
			body: func() []byte { return f.gitlabPushFor(healthyRepo) }, code: http.StatusUnauthorized, msg: "signature verification failed",
			rejected: "missing X-Gitlab-Token header"}),
		Entry("a malformed GitHub body: 400", webhookCase{headers: github(), body: func() []byte { return []byte(`{"ref": "refs/heads/main", "after": `) },
			code: http.StatusBadRequest, msg: "invalid GitHub push payload"}),
		Entry("a GitHub body of the wrong shape: 400", webhookCase{headers: github(), body: func() []byte { return []byte(`{"ref": ["main"], "repository": "x"}`) },
			code: http.StatusBadRequest, msg: "invalid GitHub push payload"}),
		Entry("a malformed GitLab body: 400", webhookCase{headers: map[string]string{"X-Gitlab-Event": "Push Hook"}, body: func() []byte { return []byte("<xml/>") },
			code: http.StatusBadRequest, msg: "invalid GitLab push payload"}),
		Entry("a malformed form-encoded body: 400", webhookCase{headers: github("Content-Type", "application/x-www-form-urlencoded"),
			body: func() []byte { return []byte("payload=%zz") }, code: http.StatusBadRequest, msg: "invalid form payload"}),
		Entry("a push naming no repository: 400", webhookCase{headers: github(),
			body: func() []byte {
				return []byte(`{"ref": "refs/heads/main", "after": "` + strings.Repeat("ab", 20) + `", "repository": {}}`)
			},
			code: http.StatusBadRequest, msg: "the push payload names no repository URL"}),
		Entry("a call from no known provider: 400", webhookCase{headers: map[string]string{"Content-Type": "application/json"}, body: f.healthyPush,
			code: http.StatusBadRequest, msg: "unsupported webhook: expected a GitHub (X-GitHub-Event), GitLab (X-Gitlab-Event), Bitbucket Cloud (X-Hook-UUID), Bitbucket Server (X-Event-Key), Gogs (X-Gogs-Event) or Azure DevOps (X-Vss-ActivityId) call"}),
		Entry("a GET: 405", webhookCase{method: http.MethodGet, body: func() []byte { return nil },
			code: http.StatusMethodNotAllowed, msg: "only POST is accepted"}),
		Entry("a body over the limit: 413", webhookCase{headers: github(), body: func() []byte { return bytes.Repeat([]byte(" "), webhook.DefaultMaxBytes+1) },
			code: http.StatusRequestEntityTooLarge, msg: "reading the payload"}),
		Entry("a valid call for a GitRepo whose webhookSecret does not exist: 500", webhookCase{
			headers: github(), sign: func(b []byte) string { return signature(f.webhookSecret, b) },
			body: func() []byte { return f.pushFor("hook-missing-secret") }, code: http.StatusInternalServerError,
			msg: "some GitRepos could not be triggered", failed: "the webhook secret of a GitRepo cannot be read"}),
		Entry("a valid call for a GitRepo whose webhookSecret has no token: 500", webhookCase{
			headers: github(), sign: func(b []byte) string { return signature(f.webhookSecret, b) },
			body: func() []byte { return f.pushFor("hook-keyless-secret") }, code: http.StatusInternalServerError,
			msg: "some GitRepos could not be triggered", failed: "the webhook secret of a GitRepo cannot be read"}),
	)
}
