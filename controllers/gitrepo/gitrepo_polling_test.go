package gitrepo_test

import (
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/sourcepoll"
)

// gitBackend is git's own smart-HTTP server, as Fleet's e2e suite serves
// its test repositories.
const gitBackend = "/usr/lib/git-core/git-http-backend"

// gitCLI runs git in dir and returns its trimmed output.
func gitCLI(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// pushFiles writes files into the clone at dir, commits and pushes them
// over HTTP, and returns the commit.
func pushFiles(t *testing.T, dir string, files map[string]string) string {
	t.Helper()
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	gitCLI(t, dir, "add", "-A")
	gitCLI(t, dir, "commit", "-q", "-m", "change")
	gitCLI(t, dir, "push", "-q", "origin", "HEAD:master")
	return gitCLI(t, dir, "rev-parse", "HEAD")
}

// TestPollingPicksUpAPushOverHTTP, as Fleet's e2e spec "when updating a git
// repository monitored via polling" does: a GitRepo polling every 15s (the
// default) of a repository served by git-http-backend finds a commit pushed
// to it within the interval, its jitter and a margin, and its Bundles carry
// the new commit.
func TestPollingPicksUpAPushOverHTTP(t *testing.T) {
	if _, err := os.Stat(gitBackend); err != nil {
		t.Fatalf("%s is missing: install git (make test-deps does)", gitBackend)
	}
	g := NewWithT(t)
	ns := newNamespace(t)
	root := t.TempDir()
	gitCLI(t, root, "init", "-q", "--bare", "-b", "master", "served.git")
	// Pushes over HTTP without authentication, as the e2e git server allows.
	gitCLI(t, filepath.Join(root, "served.git"), "config", "http.receivepack", "true")
	srv := httptest.NewServer(&cgi.Handler{Path: gitBackend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}})
	t.Cleanup(srv.Close)
	url := srv.URL + "/served.git"
	clone := filepath.Join(root, "clone")
	gitCLI(t, root, "clone", "-q", url, clone)
	first := pushFiles(t, clone, appFiles("polled", "1"))

	interval := fleet.DefaultPollingInterval
	createGitRepo(g, ns, "polled", fleet.GitRepoSpec{Repo: url, Paths: []string{"apps"}, PollingInterval: every(interval)})
	g.Eventually(bundleCommits(g, ns, "polled"), eventually, poll).Should(Equal(map[string]string{"polled-apps-polled": first}))
	// lastPollingTriggered says when it polled, as Fleet's does: what the
	// dashboard shows and fleet analyze's gitrepo-behind check reads.
	var polledFirst time.Time
	g.Eventually(func(g Gomega) {
		repo := getGitRepo(g, ns, "polled")()
		g.Expect(repo.Status.Commit).To(Equal(first))
		polledFirst = repo.Status.LastPollingTriggered.Time
		g.Expect(polledFirst).To(BeTemporally("~", time.Now(), time.Minute))
	}, eventually, poll).Should(Succeed())

	// Just after a poll, so that the push waits for a whole interval at
	// most; the deadline is the interval, its jitter and a margin for the
	// poll's own work (an ls-remote and a fetch through git's CGI backend,
	// the Bundle's update), seconds on a loaded machine. The deadline stays
	// under two intervals at their shortest (2 × 13.5 s): the poll after the
	// next one would be too late.
	second := pushFiles(t, clone, appFiles("polled", "2"))
	pushed := time.Now()
	deadline := sourcepoll.Jitter(interval, 1) + 10*time.Second
	g.Eventually(bundleCommits(g, ns, "polled"), deadline, poll).Should(Equal(map[string]string{"polled-apps-polled": second}),
		"the pushed commit %s within %s", second, deadline)
	t.Logf("the push was picked up after %s", time.Since(pushed).Round(100*time.Millisecond))
	g.Expect(bundles(g, ns, "polled")["polled-apps-polled"].Spec.Resources).To(ContainElement(HaveField("Content", ContainSubstring("key: 2"))))
	g.Eventually(getGitRepo(g, ns, "polled"), eventually, poll).Should(And(HaveField("Status.Commit", second),
		HaveField("Status.LastPollingTriggered.Time", BeTemporally(">=", pushed.Truncate(time.Second)))),
		"the poll that found %s is recorded (first recorded %s)", second, polledFirst)
}
