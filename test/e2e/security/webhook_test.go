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

const (
	// hookedNS and hookedName are the GitRepo the attacker pushes for, and
	// hookedGitName its repository.
	hookedNS      = "tenant-hooked"
	hookedName    = "pushed-app"
	hookedGitName = "webhook-src"
)

// webhookHole is what the specs of hole 11 share.
type webhookHole struct {
	url     string
	replies []string
}

// Hole 11: the git push webhook. The attacker (foothold d) can send HTTP to
// the webhook port and knows no secret.
var _ = Describe("Hole 11: the git push webhook refuses what it cannot trust", Ordered, ContinueOnFailure, webhookSpecs)

// webhookSpecs are the specs of hole 11, in that order.
func webhookSpecs() {
	s := &webhookHole{}

	BeforeAll(func() {
		repo, err := gittest.NewRepo(filepath.Join(env.GitRoot, hookedGitName), "main")
		Expect(err).NotTo(HaveOccurred())
		_, err = repo.Commit("app", map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: hooked}\n"})
		Expect(err).NotTo(HaveOccurred())
		s.url = env.Git.RepoURL(hookedGitName)
		Expect(env.Admin.Create(env.Ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hookedNS}})).To(Succeed())
		Expect(env.Admin.Create(env.Ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: hookedNS, Name: hookedName},
			Spec: fleet.GitRepoSpec{Repo: s.url, Branch: "main", PollingInterval: &metav1.Duration{Duration: time.Hour}}})).To(Succeed())
		Eventually(func() string { return s.victim().Status.Commit }, 60*time.Second, 200*time.Millisecond).ShouldNot(BeEmpty())
	})

	It("11: an unsigned push for a GitRepo without webhookSecret is refused with 401 when the manager has a webhook secret", func() {
		was := s.victim()
		commit := strings.Repeat("ab", 20)
		Expect(s.call(s.pushOf(commit), "")).To(Equal(http.StatusUnauthorized))
		Expect(s.call(s.pushOf(commit), "guessed")).To(Equal(http.StatusUnauthorized))
		s.unchanged(was)

		By("the same push signed with the manager-wide secret is taken: the refusal is the signature's")
		Expect(s.call(s.pushOf(commit), managerWebhookSecret)).To(Equal(http.StatusOK))
		Eventually(func() string { return s.victim().Status.WebhookCommit }, 10*time.Second, 100*time.Millisecond).Should(Equal(commit))
	})

	It("11: without a secret, a push for a followed repository is answered as one for a repository nobody follows", func() {
		was := s.victim()
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
			followedCode := s.call(pushTo(s.url), secret)
			followedBody := s.replies[len(s.replies)-1]
			unfollowedCode := s.call(pushTo(unfollowed), secret)
			unfollowedBody := s.replies[len(s.replies)-1]
			Expect(followedCode).To(Equal(http.StatusUnauthorized))
			Expect(unfollowedCode).To(Equal(followedCode), "the status code tells whether a GitRepo follows the repository")
			Expect(unfollowedBody).To(Equal(followedBody), "the body tells whether a GitRepo follows the repository")
		}
		s.unchanged(was)

		By("whoever holds the manager-wide secret is told that nobody follows it")
		Expect(s.call(pushTo(unfollowed), managerWebhookSecret)).To(Equal(http.StatusOK))
		Expect(s.replies[len(s.replies)-1]).To(ContainSubstring("no GitRepo follows"))
	})

	It("11: a body over 1 MiB is refused with 413", func() {
		was := s.victim()
		big := append(s.pushOf(strings.Repeat("cd", 20)), bytes.Repeat([]byte(" "), 2<<20)...)
		Expect(s.call(big, managerWebhookSecret)).To(Equal(http.StatusRequestEntityTooLarge))
		s.unchanged(was)
	})

	It("11: a commit that is not a hex object name is refused with 400 and never reaches the status", func() {
		was := s.victim()
		Expect(s.call(s.pushOf(strings.Repeat("a", 10<<10)), managerWebhookSecret)).To(Equal(http.StatusBadRequest))
		Expect(s.call(s.pushOf("../../not-a-commit"), managerWebhookSecret)).To(Equal(http.StatusBadRequest))
		s.unchanged(was)
		Expect(len(s.victim().Status.WebhookCommit)).To(BeNumerically("<=", 64))
	})

	It("11: no reply names a GitRepo's namespace or name", func() {
		Expect(s.replies).NotTo(BeEmpty())
		for _, r := range s.replies {
			Expect(r).NotTo(ContainSubstring(hookedNS))
			Expect(r).NotTo(ContainSubstring(hookedName))
		}
	})

	It("11: a flood from one address is answered 429 and changes nothing", func() {
		was := s.victim()
		codes := map[int]int{}
		for range 200 {
			codes[s.send(s.pushOf(strings.Repeat("ef", 20)), "", true)]++
		}
		By("answers: " + strings.TrimSpace(strings.ReplaceAll(strings.Trim(jsonOf(codes), "{}"), ",", ", ")))
		Expect(codes[http.StatusTooManyRequests]).To(BeNumerically(">", 0))
		Expect(codes[http.StatusOK]).To(BeZero())
		s.unchanged(was)
		// Let the bucket of this address fill again for whatever runs next.
		time.Sleep(5 * time.Second)
	})
}

// send posts body as a GitHub push, signed with secret unless empty,
// and returns the status code; every reply is kept.
func (s *webhookHole) send(body []byte, secret string, quiet bool) int {
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
	s.replies = append(s.replies, string(raw))
	if !quiet {
		By(resp.Status + ": " + strings.TrimSpace(string(raw)))
	}
	return resp.StatusCode
}

// call sends body as send does, reporting the reply.
func (s *webhookHole) call(body []byte, secret string) int {
	GinkgoHelper()
	return s.send(body, secret, false)
}

// pushOf is a GitHub push of commit to the repository.
func (s *webhookHole) pushOf(commit string) []byte {
	b, err := json.Marshal(map[string]any{"ref": "refs/heads/main", "after": commit,
		"repository": map[string]any{"clone_url": s.url, "default_branch": "main"}})
	Expect(err).NotTo(HaveOccurred())
	return b
}

// victim reads the attacked GitRepo.
func (s *webhookHole) victim() *fleet.GitRepo {
	GinkgoHelper()
	r := &fleet.GitRepo{}
	Expect(env.Admin.Get(env.Ctx, types.NamespacedName{Namespace: hookedNS, Name: hookedName}, r)).To(Succeed())
	return r
}

// unchanged asserts that the GitRepo's webhookCommit, commit and spec
// stay as they were.
func (s *webhookHole) unchanged(was *fleet.GitRepo) {
	GinkgoHelper()
	Consistently(func(g Gomega) {
		now := s.victim()
		g.Expect(now.UID).To(Equal(was.UID))
		g.Expect(now.Generation).To(Equal(was.Generation))
		g.Expect(now.Status.WebhookCommit).To(Equal(was.Status.WebhookCommit))
		g.Expect(now.Status.Commit).To(Equal(was.Status.Commit))
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
}

func jsonOf(v any) string {
	GinkgoHelper()
	b, err := json.Marshal(v)
	Expect(err).NotTo(HaveOccurred())
	return string(b)
}
