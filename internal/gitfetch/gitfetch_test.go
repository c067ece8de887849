package gitfetch_test

import (
	"context"
	"encoding/pem"
	"net"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/gitfetch"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/internal/outcome"
)

func newRepo(t *testing.T, g *WithT, root, name string) *gittest.Repo {
	t.Helper()
	r, err := gittest.NewRepo(filepath.Join(root, name), "main")
	g.Expect(err).NotTo(HaveOccurred())
	return r
}

func commit(g *WithT, r *gittest.Repo, files map[string]string, remove ...string) string {
	sha, err := r.Commit("change", files, remove...)
	g.Expect(err).NotTo(HaveOccurred())
	return sha
}

func readFile(g *WithT, dir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, name))
	g.Expect(err).NotTo(HaveOccurred())
	return string(b)
}

func TestResolve(t *testing.T) {
	main := plumbing.NewHash("1111111111111111111111111111111111111111")
	dev := plumbing.NewHash("2222222222222222222222222222222222222222")
	tagObj := plumbing.NewHash("3333333333333333333333333333333333333333")
	refs := []*plumbing.Reference{
		plumbing.NewSymbolicReference(plumbing.HEAD, "refs/heads/main"),
		plumbing.NewHashReference("refs/heads/main", main),
		plumbing.NewHashReference("refs/heads/dev", dev),
		plumbing.NewHashReference("refs/tags/v1", dev),
		plumbing.NewHashReference("refs/tags/v2", tagObj),
		plumbing.NewHashReference("refs/tags/v2^{}", main),
	}
	for _, tc := range []struct {
		name, branch, revision string
		want                   plumbing.Hash
		wantReason             string
	}{
		{name: "default branch follows HEAD", want: main},
		{name: "branch", branch: "dev", want: dev},
		{name: "missing branch", branch: "nope", wantReason: fleet.ReasonBranchNotFound},
		{name: "lightweight tag", revision: "v1", want: dev},
		{name: "annotated tag is peeled", revision: "v2", want: main},
		{name: "revision wins over branch", branch: "dev", revision: "v2", want: main},
		{name: "branch as revision", revision: "dev", want: dev},
		{name: "full ref", revision: "refs/heads/dev", want: dev},
		{name: "missing revision", revision: "v9", wantReason: fleet.ReasonRevisionNotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, h, err := gitfetch.Resolve(refs, "https://example.com/r", tc.branch, tc.revision)
			if tc.wantReason != "" {
				g.Expect(outcome.IsStalling(err)).To(BeTrue(), "a person must act: %v", err)
				g.Expect(outcome.ReasonOf(err, "")).To(Equal(tc.wantReason))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(h).To(Equal(tc.want))
		})
	}
	g := NewWithT(t)
	_, _, err := gitfetch.Resolve(refs, "https://example.com/r", "nope", "")
	g.Expect(err).To(MatchError("branch nope not found in https://example.com/r"))
}

func TestLocalRepository(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	root := t.TempDir()
	repo := newRepo(t, g, root, "src")
	first := commit(g, repo, map[string]string{"app/fleet.yaml": "namespace: a\n", "app/cm.yaml": "kind: ConfigMap\n", "README.md": "hi"})
	f := &gitfetch.Fetcher{CacheDir: filepath.Join(root, "cache"), AllowLocal: true}
	o := gitfetch.Options{Key: "ns/repo", URL: repo.Dir}

	latest, err := f.LatestCommit(ctx, o)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(latest).To(Equal(first))

	dir, err := f.Checkout(ctx, o, latest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(readFile(g, dir, "app/cm.yaml")).To(Equal("kind: ConfigMap\n"))
	g.Expect(filepath.Join(dir, ".git")).NotTo(BeAnExistingFile())

	second := commit(g, repo, map[string]string{"README.md": "bye"}, "app")
	latest, err = f.LatestCommit(ctx, gitfetch.Options{Key: "ns/repo", URL: "file://" + repo.Dir})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(latest).To(Equal(second))
	dir, err = f.Checkout(ctx, o, second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(readFile(g, dir, "README.md")).To(Equal("bye"))
	g.Expect(filepath.Join(dir, "app")).NotTo(BeADirectory(), "a directory removed in git is gone from the checkout")

	// An older commit is still in the cache.
	dir, err = f.Checkout(ctx, o, first)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(readFile(g, dir, "README.md")).To(Equal("hi"))

	// Branches, tags and shas.
	g.Expect(repo.Tag("v1", "release 1")).To(Succeed())
	g.Expect(repo.Branch("dev")).To(Succeed())
	third := commit(g, repo, map[string]string{"dev.txt": "dev"})
	for _, tc := range []struct {
		o    gitfetch.Options
		want string
	}{
		{gitfetch.Options{Branch: "dev"}, third},
		{gitfetch.Options{Branch: "main"}, second},
		{gitfetch.Options{}, third}, // HEAD points to dev now
		{gitfetch.Options{Revision: "v1"}, second},
		{gitfetch.Options{Revision: first}, first},
	} {
		tc.o.Key, tc.o.URL = "ns/other", repo.Dir
		latest, err := f.LatestCommit(ctx, tc.o)
		g.Expect(err).NotTo(HaveOccurred(), "%+v", tc.o)
		g.Expect(latest).To(Equal(tc.want), "%+v", tc.o)
		_, err = f.Checkout(ctx, tc.o, latest)
		g.Expect(err).NotTo(HaveOccurred(), "%+v", tc.o)
	}

	_, err = f.LatestCommit(ctx, gitfetch.Options{Key: "ns/repo", URL: repo.Dir, Branch: "nope"})
	g.Expect(err).To(MatchError("branch nope not found in " + repo.Dir))
	_, err = f.Checkout(ctx, gitfetch.Options{Key: "ns/x", URL: repo.Dir, Revision: "0123456789012345678901234567890123456789"}, "0123456789012345678901234567890123456789")
	g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonRevisionNotFound), "%v", err)
	_, err = f.LatestCommit(ctx, gitfetch.Options{Key: "ns/repo", URL: filepath.Join(root, "missing")})
	g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonRepoNotFound), "%v", err)

	g.Expect(f.Remove("ns/repo")).To(Succeed())
	g.Expect(filepath.Join(root, "cache", "ns", "repo")).NotTo(BeADirectory())
}

func TestHTTPRepository(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	root := t.TempDir()
	repo := newRepo(t, g, root, "src")
	first := commit(g, repo, map[string]string{"a/cm.yaml": "one"})
	srv := gittest.NewServer(root)
	defer srv.Close()
	srv.SetBasicAuth("user", "s3cret")
	f := &gitfetch.Fetcher{CacheDir: filepath.Join(root, "cache"), AllowLocal: true}
	secret := func(user, pass string) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "creds"},
			Type:       corev1.SecretTypeBasicAuth,
			Data:       map[string][]byte{"username": []byte(user), "password": []byte(pass)},
		}
	}
	o := gitfetch.Options{Key: "ns/repo", URL: srv.RepoURL("src"), Secret: secret("user", "s3cret")}

	latest, err := f.LatestCommit(ctx, o)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(latest).To(Equal(first))
	dir, err := f.Checkout(ctx, o, latest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(readFile(g, dir, "a/cm.yaml")).To(Equal("one"))

	second := commit(g, repo, map[string]string{"a/cm.yaml": "two"})
	latest, err = f.LatestCommit(ctx, o)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(latest).To(Equal(second))
	before := srv.Fetches()
	dir, err = f.Checkout(ctx, o, latest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(readFile(g, dir, "a/cm.yaml")).To(Equal("two"))
	g.Expect(srv.Fetches()-before).To(BeEquivalentTo(1), "a full cache fetches once, incrementally")
	_, err = f.Checkout(ctx, o, latest)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(srv.Fetches()-before).To(BeEquivalentTo(1), "the same commit is not fetched again")

	for _, s := range []*corev1.Secret{nil, secret("user", "wrong")} {
		_, err = f.LatestCommit(ctx, gitfetch.Options{Key: "ns/repo", URL: srv.RepoURL("src"), Secret: s})
		g.Expect(err).To(MatchError(ContainSubstring("authentication failed for " + srv.RepoURL("src") + ": check clientSecretName")))
		g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonAuthFailed))
	}
	_, err = f.LatestCommit(ctx, gitfetch.Options{Key: "ns/repo", URL: srv.RepoURL("src"), Branch: "dev", Secret: secret("user", "s3cret")})
	g.Expect(err).To(MatchError("branch dev not found in " + srv.RepoURL("src")))
	_, err = f.LatestCommit(ctx, gitfetch.Options{Key: "ns/repo", URL: srv.RepoURL("nothing"), Secret: secret("user", "s3cret")})
	g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonRepoNotFound), "%v", err)
}

func TestTLS(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	root := t.TempDir()
	repo := newRepo(t, g, root, "src")
	first := commit(g, repo, map[string]string{"x.yaml": "x"})
	srv := gittest.NewServer(root)
	srv.Close()
	tlsSrv := httptest.NewTLSServer(srv)
	defer tlsSrv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: tlsSrv.Certificate().Raw})
	f := &gitfetch.Fetcher{CacheDir: filepath.Join(root, "cache"), AllowLocal: true}
	url := tlsSrv.URL + "/src"

	_, err := f.LatestCommit(ctx, gitfetch.Options{Key: "ns/r", URL: url})
	g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonTLS), "%v", err)
	g.Expect(err.Error()).To(ContainSubstring("set caBundle"))

	for _, o := range []gitfetch.Options{{CABundle: ca}, {InsecureSkipTLSVerify: true}} {
		o.Key, o.URL = "ns/r", url
		latest, err := f.LatestCommit(ctx, o)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(latest).To(Equal(first))
		_, err = f.Checkout(ctx, o, latest)
		g.Expect(err).NotTo(HaveOccurred())
	}
}

func TestTransientAndConfigErrors(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	f := &gitfetch.Fetcher{CacheDir: t.TempDir(), ListTimeout: 5 * time.Second}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	l.Close()
	_, err = f.LatestCommit(ctx, gitfetch.Options{Key: "ns/r", URL: "http://" + addr + "/repo"})
	g.Expect(err).To(HaveOccurred())
	g.Expect(outcome.IsStalling(err)).To(BeFalse(), "an unreachable server is transient: %v", err)
	g.Expect(err.Error()).To(ContainSubstring(addr))

	_, err = f.LatestCommit(ctx, gitfetch.Options{Key: "ns/r", URL: "git@example.com:org/repo.git"})
	g.Expect(err).To(MatchError(ContainSubstring("has no clientSecretName")))
	sshSecret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "ssh"},
		Type:       corev1.SecretTypeSSHAuth,
		Data:       map[string][]byte{corev1.SSHAuthPrivateKey: []byte("key")},
	}
	_, err = f.LatestCommit(ctx, gitfetch.Options{Key: "ns/r", URL: "ssh://git@example.com/org/repo.git", Secret: sshSecret})
	g.Expect(err).To(MatchError(ContainSubstring("Secret ssh has no known_hosts key")))
	g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonHostKey))
	sshSecret.Data[gitfetch.KnownHostsKey] = []byte("example.com ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl\n")
	_, err = f.LatestCommit(ctx, gitfetch.Options{Key: "ns/r", URL: "ssh://git@example.com/org/repo.git", Secret: sshSecret})
	g.Expect(err).To(MatchError(ContainSubstring("not a usable unencrypted private key")))
	_, err = f.LatestCommit(ctx, gitfetch.Options{Key: "ns/r", URL: "https://example.com/org/repo.git", Secret: sshSecret})
	g.Expect(err).To(MatchError(ContainSubstring("holds an SSH key")))
}

// TestShallowFetchFromGit runs against git's own smart-HTTP server, which
// (unlike go-git's) serves shallow fetches: the cache starts shallow, stays
// shallow on new commits, and becomes a full clone when an older commit is
// wanted. Skipped where git is not installed.
func TestShallowFetchFromGit(t *testing.T) {
	backend := "/usr/lib/git-core/git-http-backend"
	if _, err := os.Stat(backend); err != nil {
		t.Fatalf("%s is missing: install git (make test-deps does)", backend)
	}
	g := NewWithT(t)
	ctx := context.Background()
	root := t.TempDir()
	repo := newRepo(t, g, root, "src")
	shas := make([]string, 0, 3)
	for _, content := range []string{"a", "b", "c"} {
		shas = append(shas, commit(g, repo, map[string]string{"f.txt": content}))
	}
	srv := httptest.NewServer(&cgi.Handler{Path: backend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}})
	defer srv.Close()
	f := &gitfetch.Fetcher{CacheDir: filepath.Join(root, "cache"), AllowLocal: true}
	o := gitfetch.Options{Key: "ns/r", URL: srv.URL + "/src"}
	shallowFiles := func() []string {
		m, err := filepath.Glob(filepath.Join(root, "cache", "ns", "r", "*", "repo.git", "shallow"))
		g.Expect(err).NotTo(HaveOccurred())
		return m
	}

	for _, content := range []string{"", "d", "e"} {
		if content != "" {
			commit(g, repo, map[string]string{"f.txt": content})
		}
		latest, err := f.LatestCommit(ctx, o)
		g.Expect(err).NotTo(HaveOccurred())
		dir, err := f.Checkout(ctx, o, latest)
		g.Expect(err).NotTo(HaveOccurred())
		if content != "" {
			g.Expect(readFile(g, dir, "f.txt")).To(Equal(content))
		}
		g.Expect(shallowFiles()).To(HaveLen(1), "the cache is a shallow clone")
	}
	dir, err := f.Checkout(ctx, o, shas[0])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(readFile(g, dir, "f.txt")).To(Equal("a"))
	g.Expect(shallowFiles()).To(BeEmpty(), "an older commit needs the full history")
}

// Local repositories read whatever the manager can read, other GitRepos'
// caches included: they are refused unless allowed.
func TestLocalRepositoriesRefusedByDefault(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	f := &gitfetch.Fetcher{CacheDir: filepath.Join(root, "cache")}
	for _, url := range []string{root, "file://" + root, "./relative"} {
		_, err := f.LatestCommit(context.Background(), gitfetch.Options{Key: "ns/name", URL: url})
		g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonLocalRepoDisabled), url)
		g.Expect(err).To(MatchError(ContainSubstring("--allow-local-repos")))
		_, err = f.LatestCommit(context.Background(), gitfetch.Options{Key: "ns/name", URL: url, Revision: strings.Repeat("a", 40)})
		g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonLocalRepoDisabled), url)
		_, err = f.Checkout(context.Background(), gitfetch.Options{Key: "ns/name", URL: url}, strings.Repeat("a", 40))
		g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonLocalRepoDisabled), url)
	}
}

// A repository whose history is replaced at the same URL (a force-push of
// unrelated history, or a repository made anew) is fetched again: the cache
// of the old history must not stand in the way.
func TestHistoryReplacedAtSameURL(t *testing.T) {
	for _, transport := range []string{"file", "http"} {
		t.Run(transport, func(t *testing.T) {
			g := NewWithT(t)
			ctx := context.Background()
			root := t.TempDir()
			repo := newRepo(t, g, root, "src")
			first := commit(g, repo, map[string]string{"cm.yaml": "old"})
			url := repo.Dir
			if transport == "http" {
				srv := httptest.NewServer(gittest.NewServer(root))
				defer srv.Close()
				url = srv.URL + "/src"
			}
			f := &gitfetch.Fetcher{CacheDir: filepath.Join(root, "cache"), AllowLocal: true}
			o := gitfetch.Options{Key: "ns/repo", URL: url}
			_, err := f.Checkout(ctx, o, first)
			g.Expect(err).NotTo(HaveOccurred())

			g.Expect(os.RemoveAll(repo.Dir)).To(Succeed())
			repo = newRepo(t, g, root, "src")
			replaced := commit(g, repo, map[string]string{"cm.yaml": "new"})
			latest, err := f.LatestCommit(ctx, o)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(latest).To(Equal(replaced))
			dir, err := f.Checkout(ctx, o, latest)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(readFile(g, dir, "cm.yaml")).To(Equal("new"))
		})
	}
}

// Each fetch into the cache adds a pack, and every pack's index is read when
// the cache is opened: a repository followed for thousands of commits must
// not make each checkout read thousands. Past its bound the cache starts
// over, and checks out the right files all along.
func TestCachePacksBounded(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	root := t.TempDir()
	repo := newRepo(t, g, root, "src")
	commit(g, repo, map[string]string{"a/cm.yaml": "0", "b/cm.yaml": "same"})
	srv := gittest.NewServer(root)
	defer srv.Close()
	cache := filepath.Join(root, "cache")
	f := &gitfetch.Fetcher{CacheDir: cache}
	o := gitfetch.Options{Key: "ns/repo", URL: srv.RepoURL("src")}
	packs := func() int {
		n := 0
		g.Expect(filepath.WalkDir(cache, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() && strings.HasPrefix(d.Name(), "pack-") && strings.HasSuffix(d.Name(), ".pack") {
				n++
			}
			return err
		})).To(Succeed())
		return n
	}
	most := 0
	for i := 1; i <= 80; i++ {
		sha := commit(g, repo, map[string]string{"a/cm.yaml": strconv.Itoa(i)})
		dir, err := f.Checkout(ctx, o, sha)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(readFile(g, dir, "a/cm.yaml")).To(Equal(strconv.Itoa(i)))
		g.Expect(readFile(g, dir, "b/cm.yaml")).To(Equal("same"))
		most = max(most, packs())
	}
	g.Expect(most).To(BeNumerically(">", 32), "one pack per fetch")
	g.Expect(most).To(BeNumerically("<=", 65), "the cache started over past its bound")
	g.Expect(packs()).To(BeNumerically("<", 30))
}
