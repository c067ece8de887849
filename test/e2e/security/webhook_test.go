package security_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
)

// managerWebhookSecret is the manager-wide webhook secret of this suite
// (--webhook-secret-file): GitRepos without webhookSecret need calls signed
// with it.
const managerWebhookSecret = "manager-wide-s3cret"

// Hole 11: the git push webhook. The attacker (foothold d) can send HTTP to
// the webhook port and knows no secret.
var _ = Describe("Hole 11: the git push webhook refuses what it cannot trust", Ordered, ContinueOnFailure, func() {
	const (
		ns      = "tenant-hooked"
		name    = "pushed-app"
		gitName = "webhook-src"
	)
	var (
		url     string
		replies []string
	)

	// send posts body as a GitHub push, signed with secret unless empty,
	// and returns the status code; every reply is kept.
	send := func(body []byte, secret string, quiet bool) int {
		GinkgoHelper()
		req, err := http.NewRequestWithContext(env.Ctx, http.MethodPost, env.WebhookURL, bytes.NewReader(body))
		Expect(err).NotTo(HaveOccurred())
		req.Header.Set("X-GitHub-Event", "push")
		req.Header.Set("Content-Type", "application/json")
		if secret != "" {
			mac := hmac.New(sha256.New, []byte(secret))
			mac.Write(body)
			req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
		}
		resp, err := http.DefaultClient.Do(req)
		Expect(err).NotTo(HaveOccurred())
		defer resp.Body.Close()
		raw, err := io.ReadAll(resp.Body)
		Expect(err).NotTo(HaveOccurred())
		replies = append(replies, string(raw))
		if !quiet {
			By(resp.Status + ": " + strings.TrimSpace(string(raw)))
		}
		return resp.StatusCode
	}
	call := func(body []byte, secret string) int {
		GinkgoHelper()
		return send(body, secret, false)
	}
	pushOf := func(commit string) []byte {
		b, err := json.Marshal(map[string]any{"ref": "refs/heads/main", "after": commit,
			"repository": map[string]any{"clone_url": url, "default_branch": "main"}})
		Expect(err).NotTo(HaveOccurred())
		return b
	}
	victim := func() *fleet.GitRepo {
		GinkgoHelper()
		r := &fleet.GitRepo{}
		Expect(env.Admin.Get(env.Ctx, types.NamespacedName{Namespace: ns, Name: name}, r)).To(Succeed())
		return r
	}
	// unchanged asserts that the GitRepo's webhookCommit, commit and spec
	// stay as they were.
	unchanged := func(was *fleet.GitRepo) {
		GinkgoHelper()
		Consistently(func(g Gomega) {
			now := victim()
			g.Expect(now.UID).To(Equal(was.UID))
			g.Expect(now.Generation).To(Equal(was.Generation))
			g.Expect(now.Status.WebhookCommit).To(Equal(was.Status.WebhookCommit))
			g.Expect(now.Status.Commit).To(Equal(was.Status.Commit))
		}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
	}

	BeforeAll(func() {
		repo, err := gittest.NewRepo(filepath.Join(env.GitRoot, gitName), "main")
		Expect(err).NotTo(HaveOccurred())
		_, err = repo.Commit("app", map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: hooked}\n"})
		Expect(err).NotTo(HaveOccurred())
		url = env.Git.RepoURL(gitName)
		Expect(env.Admin.Create(env.Ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		Expect(env.Admin.Create(env.Ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: fleet.GitRepoSpec{Repo: url, Branch: "main", PollingInterval: &metav1.Duration{Duration: time.Hour}}})).To(Succeed())
		Eventually(func() string { return victim().Status.Commit }, 60*time.Second, 200*time.Millisecond).ShouldNot(BeEmpty())
	})

	It("11: an unsigned push for a GitRepo without webhookSecret is refused with 401 when the manager has a webhook secret", func() {
		was := victim()
		commit := strings.Repeat("ab", 20)
		Expect(call(pushOf(commit), "")).To(Equal(http.StatusUnauthorized))
		Expect(call(pushOf(commit), "guessed")).To(Equal(http.StatusUnauthorized))
		unchanged(was)

		By("the same push signed with the manager-wide secret is taken: the refusal is the signature's")
		Expect(call(pushOf(commit), managerWebhookSecret)).To(Equal(http.StatusOK))
		Eventually(func() string { return victim().Status.WebhookCommit }, 10*time.Second, 100*time.Millisecond).Should(Equal(commit))
	})

	It("11: without a secret, a push for a followed repository is answered as one for a repository nobody follows", func() {
		was := victim()
		commit := strings.Repeat("cd", 20)
		pushTo := func(repoURL string) []byte {
			b, err := json.Marshal(map[string]any{"ref": "refs/heads/main", "after": commit,
				"repository": map[string]any{"clone_url": repoURL, "default_branch": "main"}})
			Expect(err).NotTo(HaveOccurred())
			return b
		}
		unfollowed := env.Git.RepoURL("sec-11-followed-by-nobody")
		for _, secret := range []string{"", "guessed"} {
			By(fmt.Sprintf("signed with %q: the followed repository, then one nobody follows", secret))
			followedCode := call(pushTo(url), secret)
			followedBody := replies[len(replies)-1]
			unfollowedCode := call(pushTo(unfollowed), secret)
			unfollowedBody := replies[len(replies)-1]
			Expect(followedCode).To(Equal(http.StatusUnauthorized))
			Expect(unfollowedCode).To(Equal(followedCode), "the status code tells whether a GitRepo follows the repository")
			Expect(unfollowedBody).To(Equal(followedBody), "the body tells whether a GitRepo follows the repository")
		}
		unchanged(was)

		By("whoever holds the manager-wide secret is told that nobody follows it")
		Expect(call(pushTo(unfollowed), managerWebhookSecret)).To(Equal(http.StatusOK))
		Expect(replies[len(replies)-1]).To(ContainSubstring("no GitRepo follows"))
	})

	It("11: a body over 1 MiB is refused with 413", func() {
		was := victim()
		big := append(pushOf(strings.Repeat("cd", 20)), bytes.Repeat([]byte(" "), 2<<20)...)
		Expect(call(big, managerWebhookSecret)).To(Equal(http.StatusRequestEntityTooLarge))
		unchanged(was)
	})

	It("11: a commit that is not a hex object name is refused with 400 and never reaches the status", func() {
		was := victim()
		Expect(call(pushOf(strings.Repeat("a", 10<<10)), managerWebhookSecret)).To(Equal(http.StatusBadRequest))
		Expect(call(pushOf("../../not-a-commit"), managerWebhookSecret)).To(Equal(http.StatusBadRequest))
		unchanged(was)
		Expect(len(victim().Status.WebhookCommit)).To(BeNumerically("<=", 64))
	})

	It("11: no reply names a GitRepo's namespace or name", func() {
		Expect(replies).NotTo(BeEmpty())
		for _, r := range replies {
			Expect(r).NotTo(ContainSubstring(ns))
			Expect(r).NotTo(ContainSubstring(name))
		}
	})

	It("11: a flood from one address is answered 429 and changes nothing", func() {
		was := victim()
		codes := map[int]int{}
		for i := 0; i < 200; i++ {
			codes[send(pushOf(strings.Repeat("ef", 20)), "", true)]++
		}
		By("answers: " + strings.TrimSpace(strings.ReplaceAll(strings.Trim(jsonOf(codes), "{}"), ",", ", ")))
		Expect(codes[http.StatusTooManyRequests]).To(BeNumerically(">", 0))
		Expect(codes[http.StatusOK]).To(BeZero())
		unchanged(was)
		// Let the bucket of this address fill again for whatever runs next.
		time.Sleep(5 * time.Second)
	})
})

func jsonOf(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
