package gitrepo_test

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/gitrepo/webhook"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
)

// GitRepos that follow one repository share its git traffic by credentials:
// the GitRepos of a tenant (one Secret) cost the git server what one GitRepo
// costs, one ls-remote per poll or webhook and one fetch per commit; each
// tenant asks with its own credentials, and a tenant whose credentials the
// server refuses fails though the others' fetches of the same URL succeed.
func TestGitReposShareOneRepository(t *testing.T) {
	g := NewWithT(t)
	red, blue, mallory, solo := newNamespace(t), newNamespace(t), newNamespace(t), newNamespace(t)
	name := red + "-mono"
	files := map[string]string{}
	for i := range 4 {
		files = merge(files, appFiles(fmt.Sprintf("app%d", i), "1"))
	}
	repo, first := newGitRepo(g, name, files)
	srv := gittest.NewServer(gitRoot)
	t.Cleanup(srv.Close)
	users := map[string]string{red: "red", blue: "blue", solo: "solo", mallory: "red"}
	for _, u := range []string{"red", "blue", "solo"} {
		srv.AddUser(u, u+"-pass")
	}
	for ns, user := range users {
		password := user + "-pass"
		if ns == mallory {
			password = "guessed"
		}
		g.Expect(env.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "creds"},
			Type:       corev1.SecretTypeBasicAuth,
			Data:       map[string][]byte{"username": []byte(user), "password": []byte(password)},
		})).To(Succeed())
		g.Expect(env.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "hook"},
			Data:       map[string][]byte{webhook.SecretKey: []byte("s3cret")},
		})).To(Succeed())
	}
	url := srv.RepoURL(name)
	spec := func(app int) fleet.GitRepoSpec {
		return fleet.GitRepoSpec{Repo: url, Branch: "main", Paths: []string{fmt.Sprintf("apps/app%d", app)}, ClientSecretName: "creds",
			WebhookSecret: "hook", PollingInterval: every(time.Hour)}
	}
	// What one GitRepo alone costs.
	createGitRepo(g, solo, "app0", spec(0))
	g.Eventually(bundleCommits(g, solo, "app0"), eventually, poll).Should(Equal(map[string]string{"app0-apps-app0": first}))
	alone := srv.CountsOf("solo")

	apps := map[string]int{red: 4, blue: 3}
	for ns, n := range apps {
		for i := range n {
			createGitRepo(g, ns, fmt.Sprintf("app%d", i), spec(i))
		}
	}
	createGitRepo(g, mallory, "app0", spec(0))
	synced := func(commit string) {
		for ns, n := range apps {
			for i := range n {
				app := fmt.Sprintf("app%d", i)
				g.Eventually(bundleCommits(g, ns, app), eventually, poll).Should(Equal(map[string]string{app + "-apps-" + app: commit}), "%s/%s", ns, app)
			}
		}
	}
	synced(first)
	g.Eventually(getGitRepo(g, mallory, "app0"), eventually, poll).Should(
		condition(fleet.ConditionAccepted, metav1.ConditionFalse, "authentication failed for "+url))
	g.Expect(bundles(g, mallory, "app0")).To(BeEmpty())
	traffic := func(user string) [2]int64 {
		c := srv.CountsOf(user)
		return [2]int64{c.Lists, c.Fetches}
	}
	g.Expect(traffic("red")).To(Equal(traffic("solo")), "four GitRepos cost what one does")
	g.Expect(traffic("blue")).To(Equal(traffic("solo")), "three GitRepos cost what one does")
	g.Expect(alone.Lists-alone.Fetches).To(BeNumerically("==", 1), "one ls-remote (each fetch is an advertisement and a POST)")

	// A push, announced by one webhook call: every GitRepo is told, each
	// group asks once and fetches once.
	second := commit(g, repo, appFiles("app1", "2"))
	payload, err := json.Marshal(map[string]any{
		"ref": "refs/heads/main", "after": second,
		"repository": map[string]any{"clone_url": url + ".git", "html_url": url, "default_branch": "main"},
	})
	g.Expect(err).NotTo(HaveOccurred())
	mac := hmac.New(sha256.New, []byte("s3cret"))
	mac.Write(payload)
	req, err := http.NewRequest(http.MethodPost, webhookURL, bytes.NewReader(payload))
	g.Expect(err).NotTo(HaveOccurred())
	req.Header.Set("X-GitHub-Event", "push")
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Hub-Signature-256", "sha256="+hex.EncodeToString(mac.Sum(nil)))
	resp, err := http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.Body.Close()).To(Succeed())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	synced(second)
	g.Eventually(bundleCommits(g, solo, "app0"), eventually, poll).Should(Equal(map[string]string{"app0-apps-app0": second}))
	g.Eventually(func() [2]int64 { return traffic("red") }, eventually, poll).Should(Equal(traffic("solo")))
	g.Expect(traffic("blue")).To(Equal(traffic("solo")))
	now := srv.CountsOf("solo")
	g.Expect(now.Lists-now.Fetches).To(BeNumerically("==", 2), "one more ls-remote")
	g.Expect(now.Fetches).To(BeNumerically("==", alone.Fetches+1), "one more fetch")
	g.Expect(getGitRepo(g, mallory, "app0")()).To(condition(fleet.ConditionAccepted, metav1.ConditionFalse, "authentication failed"))
	g.Expect(bundles(g, mallory, "app0")).To(BeEmpty())
}

// A commit that one GitRepo's poll finds reaches the other GitRepos of its
// group at once, though they all wake together and their namespace may run
// only half the git fetch slots (two here) at a time: a woken GitRepo that
// finds the slots busy polls at its retry, a second or two later, not at its
// next interval (an hour here).
func TestWokenGitReposPollThroughBusySlots(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	name := ns + "-woken"
	const n = 10
	files := func(value string) map[string]string {
		out := map[string]string{}
		for i := range n {
			out = merge(out, appFiles(fmt.Sprintf("app%d", i), value))
		}
		return out
	}
	repo, first := newGitRepo(g, name, files("1"))
	url := gitServer.RepoURL(name)
	spec := func(app int, interval time.Duration) fleet.GitRepoSpec {
		return fleet.GitRepoSpec{Repo: url, Branch: "main", Paths: []string{fmt.Sprintf("apps/app%d", app)}, PollingInterval: every(interval)}
	}
	synced := func(commit string) {
		for i := range n {
			app := fmt.Sprintf("app%d", i)
			g.Eventually(bundleCommits(g, ns, app), eventually, poll).Should(Equal(map[string]string{app + "-apps-" + app: commit}), app)
		}
	}
	for i := range n {
		createGitRepo(g, ns, fmt.Sprintf("app%d", i), spec(i, time.Hour))
	}
	synced(first)

	// A GitRepo of the same group that polls often finds the push and
	// wakes the others.
	second := commit(g, repo, files("2"))
	createGitRepo(g, ns, "poller", spec(0, time.Second))
	synced(second)
}

// A woken GitRepo whose commit its group has already fetched syncs without
// a git fetch slot: here both slots of its namespace are held by polls of
// a git server that does not answer (for 30 s, the ls-remote timeout), and
// it syncs the commit another namespace's GitRepo found meanwhile.
func TestWokenGitRepoNeedsNoSlotForSharedCommit(t *testing.T) {
	g := NewWithT(t)
	red, blue := newNamespace(t), newNamespace(t)
	name := red + "-shared"
	repo, first := newGitRepo(g, name, appFiles("app0", "1"))
	url := gitServer.RepoURL(name)
	spec := func(interval time.Duration) fleet.GitRepoSpec {
		return fleet.GitRepoSpec{Repo: url, Branch: "main", Paths: []string{"apps/app0"}, PollingInterval: every(interval)}
	}
	createGitRepo(g, red, "follow", spec(time.Hour))
	createGitRepo(g, blue, "lead", spec(time.Second))
	g.Eventually(bundleCommits(g, red, "follow"), eventually, poll).Should(Equal(map[string]string{"follow-apps-app0": first}))
	g.Eventually(bundleCommits(g, blue, "lead"), eventually, poll).Should(Equal(map[string]string{"lead-apps-app0": first}))

	// A git server that answers nothing until the test ends holds red's
	// two slots (four workers, half each namespace).
	var hanging atomic.Int32
	stop := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		hanging.Add(1)
		defer hanging.Add(-1)
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	}))
	t.Cleanup(func() { close(stop); hang.Close() })
	for i := range 2 {
		createGitRepo(g, red, fmt.Sprintf("hang%d", i), fleet.GitRepoSpec{Repo: fmt.Sprintf("%s/hang%d", hang.URL, i), Branch: "main", PollingInterval: every(time.Hour)})
	}
	g.Eventually(hanging.Load, eventually, poll).Should(BeNumerically("==", 2))

	second := commit(g, repo, appFiles("app0", "2"))
	g.Eventually(bundleCommits(g, blue, "lead"), eventually, poll).Should(Equal(map[string]string{"lead-apps-app0": second}))
	g.Eventually(bundleCommits(g, red, "follow"), eventually, poll).Should(Equal(map[string]string{"follow-apps-app0": second}))
	g.Expect(hanging.Load()).To(BeNumerically("==", 2), "red's slots were held throughout")
}
