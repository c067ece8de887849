package gitshare_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/gitfetch"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/internal/gitshare"
	"github.com/gitfleet/fleet/internal/outcome"
)

// env is a repository served over HTTP with one user per tenant, and a
// Share over a real fetcher.
type env struct {
	repo  *gittest.Repo
	srv   *gittest.Server
	share *gitshare.Share
	clock *clock
}

type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func newEnv(t *testing.T, g *WithT, users ...string) *env {
	t.Helper()
	root := t.TempDir()
	repo, err := gittest.NewRepo(filepath.Join(root, "src"), "main")
	g.Expect(err).NotTo(HaveOccurred())
	srv := gittest.NewServer(root)
	t.Cleanup(srv.Close)
	for _, u := range users {
		srv.AddUser(u, u+"-pass")
	}
	c := &clock{now: time.Unix(1_000_000, 0)}
	cache := filepath.Join(root, "cache")
	return &env{repo: repo, srv: srv, clock: c, share: &gitshare.Share{
		Source:  &gitfetch.Fetcher{CacheDir: filepath.Join(cache, "repos")},
		TreeDir: filepath.Join(cache, "trees"),
		Now:     c.Now,
	}}
}

func (e *env) commit(g *WithT, files map[string]string) string {
	sha, err := e.repo.Commit("change", files)
	g.Expect(err).NotTo(HaveOccurred())
	return sha
}

// opts are the options of GitRepo key reading as user (password: the
// user's own unless given).
func (e *env) opts(key, user string, password ...string) gitfetch.Options {
	o := gitfetch.Options{Key: key, URL: e.srv.RepoURL("src"), Branch: "main"}
	if user != "" {
		pw := user + "-pass"
		if len(password) > 0 {
			pw = password[0]
		}
		o.Secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: user}, Type: corev1.SecretTypeBasicAuth,
			Data: map[string][]byte{corev1.BasicAuthUsernameKey: []byte(user), corev1.BasicAuthPasswordKey: []byte(pw)}}
	}
	return o
}

// lsRemotes are the ls-remotes among a server's answers: each fetch is an
// advertisement (counted in Lists) and an upload-pack POST.
func lsRemotes(c gittest.Counts) int64 {
	return c.Lists - c.Fetches
}

func read(g *WithT, dir, name string) string {
	b, err := os.ReadFile(filepath.Join(dir, name))
	g.Expect(err).NotTo(HaveOccurred())
	return string(b)
}

// Twenty GitRepos with the same credentials, reading at once, cost the
// server one ls-remote per interval and one fetch per commit.
func TestOneListAndFetchPerGroup(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t, g, "team", "solo")
	first := e.commit(g, map[string]string{"a/x.yaml": "a1", "b/x.yaml": "b1"})
	q := gitshare.Query{MaxAge: 15 * time.Second}
	// What one GitRepo alone costs (go-git's server takes no shallow
	// fetch: the first fetch of a repository is two).
	solo := e.opts("solo/r", "solo")
	_, err := e.share.LatestCommit(ctx, solo, q)
	g.Expect(err).NotTo(HaveOccurred())
	_, release, err := e.share.Checkout(ctx, solo, first, nil)
	g.Expect(err).NotTo(HaveOccurred())
	release()
	alone := e.srv.CountsOf("solo")
	g.Expect(lsRemotes(alone)).To(BeNumerically("==", 1))

	sync := func(prefix, want string, check func(i int, dir string)) {
		var wg sync.WaitGroup
		for i := range 20 {
			wg.Go(func() {
				o := e.opts(fmt.Sprintf("ns%d/%s%d", i%3, prefix, i), "team")
				latest, err := e.share.LatestCommit(ctx, o, q)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(latest).To(Equal(want))
				dir, release, err := e.share.Checkout(ctx, o, latest, nil)
				g.Expect(err).NotTo(HaveOccurred())
				defer release()
				check(i, dir)
			})
		}
		wg.Wait()
	}
	sync("r", first, func(i int, dir string) {
		g.Expect(read(g, dir, "a/x.yaml")).To(Equal("a1"))
		g.Expect(read(g, dir, "b/x.yaml")).To(Equal("b1"))
	})
	g.Expect(e.srv.CountsOf("team")).To(Equal(alone))

	// Within the interval, GitRepos that have not taken the group's answer
	// yet take it: a new commit is not seen and nothing is asked.
	second := e.commit(g, map[string]string{"a/x.yaml": "a2"})
	e.clock.Add(10 * time.Second)
	sync("late", first, func(int, string) {})
	g.Expect(e.srv.CountsOf("team")).To(Equal(alone))

	// A GitRepo that took the group's answer already asks again at its
	// next poll, however young the answer (each poll learns something
	// newer than the last);
	// the group's other GitRepos are told of the new commit.
	var woken []string
	e.share.Changed = func(keys []string) { woken = keys }
	renew := gitshare.Query{MaxAge: q.MaxAge, Renew: true}
	latest, err := e.share.LatestCommit(ctx, e.opts("ns0/r0", "team"), renew)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(latest).To(Equal(second))
	g.Expect(lsRemotes(e.srv.CountsOf("team"))).To(BeNumerically("==", 2))
	g.Expect(woken).To(HaveLen(39))
	g.Expect(woken).NotTo(ContainElement("ns0/r0"))
	e.share.Changed = nil
	// Woken, they take it from the group.
	latest, err = e.share.LatestCommit(ctx, e.opts("ns1/r1", "team"), renew)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(latest).To(Equal(second))
	g.Expect(lsRemotes(e.srv.CountsOf("team"))).To(BeNumerically("==", 2))
	// A retry takes it again; having taken it, its next poll asks the
	// remote.
	e.clock.Add(time.Second)
	_, err = e.share.LatestCommit(ctx, e.opts("ns1/r1", "team"), q)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lsRemotes(e.srv.CountsOf("team"))).To(BeNumerically("==", 2))
	_, err = e.share.LatestCommit(ctx, e.opts("ns1/r1", "team"), renew)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(lsRemotes(e.srv.CountsOf("team"))).To(BeNumerically("==", 3))

	// After the interval, one ls-remote and one fetch for everyone.
	third := e.commit(g, map[string]string{"a/x.yaml": "a3"})
	e.clock.Add(16 * time.Second)
	sync("r", third, func(_ int, dir string) { g.Expect(read(g, dir, "a/x.yaml")).To(Equal("a3")) })
	now := e.srv.CountsOf("team")
	g.Expect(lsRemotes(now)).To(BeNumerically("==", 4))
	g.Expect(now.Fetches).To(BeNumerically("==", alone.Fetches+1))
}

// Tenants with different credentials each ask with their own, and one
// whose credentials the server refuses fails though another's succeeded,
// and reads nothing of theirs.
func TestCredentialsDoNotShare(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t, g, "red", "blue")
	first := e.commit(g, map[string]string{"x.yaml": "1"})
	q := gitshare.Query{MaxAge: time.Minute}
	for _, user := range []string{"red", "blue"} {
		var one gittest.Counts
		for i := range 3 {
			o := e.opts(fmt.Sprintf("%s/r%d", user, i), user)
			latest, err := e.share.LatestCommit(ctx, o, q)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(latest).To(Equal(first))
			dir, release, err := e.share.Checkout(ctx, o, latest, nil)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(read(g, dir, "x.yaml")).To(Equal("1"))
			release()
			if i == 0 {
				one = e.srv.CountsOf(user)
			}
		}
		// The second and third GitRepo cost nothing more.
		g.Expect(e.srv.CountsOf(user)).To(Equal(one))
		g.Expect(lsRemotes(one)).To(BeNumerically("==", 1))
	}

	// red's name with a wrong password: a group of its own, refused.
	bad := e.opts("mallory/r", "red", "guess")
	_, err := e.share.LatestCommit(ctx, bad, q)
	g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonAuthFailed))
	_, _, err = e.share.Checkout(ctx, bad, first, nil)
	g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonAuthFailed))
	// No credentials at all: refused as well.
	_, err = e.share.LatestCommit(ctx, e.opts("anon/r", ""), q)
	g.Expect(err).To(HaveOccurred())
	g.Expect(e.srv.CountsOf("red").Refused).To(BeNumerically(">=", 2))
}

// A webhook's commit makes the group ask again, once for all its GitRepos,
// however young its answer.
func TestWebhookAsksOnce(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t, g)
	first := e.commit(g, map[string]string{"x.yaml": "1"})
	q := gitshare.Query{MaxAge: time.Hour}
	latest, err := e.share.LatestCommit(ctx, e.opts("ns/r0", ""), q)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(latest).To(Equal(first))
	second := e.commit(g, map[string]string{"x.yaml": "2"})
	third := e.commit(g, map[string]string{"x.yaml": "3"})
	// The webhook of the second push arrives after the third push: the
	// answer is the third, asked once.
	for i := range 10 {
		latest, err := e.share.LatestCommit(ctx, e.opts(fmt.Sprintf("ns/r%d", i), ""), gitshare.Query{MaxAge: time.Hour, Want: second})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(latest).To(Equal(third))
	}
	g.Expect(lsRemotes(e.srv.CountsOf(""))).To(BeNumerically("==", 2))
	// Its own announcement is answered from the group.
	latest, err = e.share.LatestCommit(ctx, e.opts("ns/r0", ""), gitshare.Query{Want: third})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(latest).To(Equal(third))
	g.Expect(lsRemotes(e.srv.CountsOf(""))).To(BeNumerically("==", 2))
}

// Trees are evicted beyond the budget and when a newer commit of the group
// arrives, never while leased; a group whose last GitRepo is removed is
// deleted.
func TestTreesAreBounded(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t, g, "red", "blue")
	e.share.MaxTreeBytes = 1500
	first := e.commit(g, map[string]string{"x.yaml": strings.Repeat("x", 1000)})

	red, blue := e.opts("red/r", "red"), e.opts("blue/r", "blue")
	redDir, redRelease, err := e.share.Checkout(ctx, red, first, nil)
	g.Expect(err).NotTo(HaveOccurred())
	// blue's tree goes beyond the budget: red's is leased and stays.
	blueDir, blueRelease, err := e.share.Checkout(ctx, blue, first, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(blueDir).NotTo(Equal(redDir))
	g.Expect(redDir).To(BeADirectory())
	// Released, the least recently used goes.
	redRelease()
	g.Expect(redDir).NotTo(BeADirectory())
	blueRelease()
	g.Expect(blueDir).To(BeADirectory())
	// Read again, red's tree is written from its object store, not
	// fetched, and blue's goes.
	againDir, again, err := e.share.Checkout(ctx, red, first, nil)
	g.Expect(err).NotTo(HaveOccurred())
	again()
	g.Expect(blueDir).NotTo(BeADirectory())
	g.Expect(againDir).To(BeADirectory())
	redFetches := e.srv.CountsOf("red").Fetches

	// A tree deleted under the Share (a cleaner of temporary
	// directories) is written again from the object store.
	g.Expect(os.RemoveAll(againDir)).To(Succeed())
	rewritten, again, err := e.share.Checkout(ctx, red, first, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(read(g, rewritten, "x.yaml")).To(HaveLen(1000))
	again()
	g.Expect(e.srv.CountsOf("red").Fetches).To(Equal(redFetches))

	// A new commit of red's group replaces its tree once released.
	dir, hold, err := e.share.Checkout(ctx, red, first, nil)
	g.Expect(err).NotTo(HaveOccurred())
	second := e.commit(g, map[string]string{"x.yaml": "small"})
	newDir, release, err := e.share.Checkout(ctx, red, second, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(read(g, newDir, "x.yaml")).To(Equal("small"))
	g.Expect(dir).To(BeADirectory())
	hold()
	g.Expect(dir).NotTo(BeADirectory())
	release()
	g.Expect(e.srv.CountsOf("red").Fetches).To(BeNumerically("==", redFetches+1))

	// The last reader of red's group goes: its trees go too.
	g.Expect(e.share.Remove("red/r")).To(Succeed())
	g.Expect(newDir).NotTo(BeADirectory())
}

// gate counts the leaves a Share asks for and holds, and refuses them
// while closed.
type gate struct {
	mu             sync.Mutex
	asked, holding int
	closed         bool
}

var errBusy = fmt.Errorf("no slot free")

func (gt *gate) take() (func(), error) {
	gt.mu.Lock()
	defer gt.mu.Unlock()
	gt.asked++
	if gt.closed {
		return nil, errBusy
	}
	gt.holding++
	return func() {
		gt.mu.Lock()
		defer gt.mu.Unlock()
		gt.holding--
	}, nil
}

func (gt *gate) state() (asked, holding int) {
	gt.mu.Lock()
	defer gt.mu.Unlock()
	return gt.asked, gt.holding
}

// The gate is asked only before the remote is: a GitRepo that takes its
// group's answer and tree needs no leave, and one refused leave asks
// nothing of the remote.
func TestGateOnlyAroundRemoteCalls(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t, g, "team")
	first := e.commit(g, map[string]string{"x.yaml": "1"})
	lead, follow := e.opts("red/lead", "team"), e.opts("blue/follow", "team")
	open, closed := &gate{}, &gate{closed: true}

	latest, err := e.share.LatestCommit(ctx, lead, gitshare.Query{MaxAge: time.Minute, Gate: open.take})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(latest).To(Equal(first))
	dir, release, err := e.share.Checkout(ctx, lead, latest, open.take)
	g.Expect(err).NotTo(HaveOccurred())
	release()
	g.Expect(read(g, dir, "x.yaml")).To(Equal("1"))
	asked, holding := open.state()
	g.Expect(asked).To(Equal(2), "one leave for the ls-remote, one for the fetch")
	g.Expect(holding).To(BeZero(), "each given back once its call is over")
	counts := e.srv.CountsOf("team")

	// The group has both: no leave asked, none needed.
	latest, err = e.share.LatestCommit(ctx, follow, gitshare.Query{MaxAge: time.Minute, Gate: closed.take})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(latest).To(Equal(first))
	dir, release, err = e.share.Checkout(ctx, follow, latest, closed.take)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(read(g, dir, "x.yaml")).To(Equal("1"))
	release()
	asked, _ = closed.state()
	g.Expect(asked).To(BeZero())

	// The answer is too old: the remote must be asked, the leave is
	// refused, and the caller gets the refusal; the remote hears nothing.
	second := e.commit(g, map[string]string{"x.yaml": "2"})
	e.clock.Add(2 * time.Minute)
	_, err = e.share.LatestCommit(ctx, follow, gitshare.Query{MaxAge: time.Minute, Gate: closed.take})
	g.Expect(err).To(MatchError(errBusy))
	_, _, err = e.share.Checkout(ctx, follow, second, closed.take)
	g.Expect(err).To(MatchError(errBusy))
	g.Expect(e.srv.CountsOf("team")).To(Equal(counts))
	asked, _ = closed.state()
	g.Expect(asked).To(Equal(2))
}

// A new commit of a group is written over the group's last tree when
// nobody reads it, rewriting only the files that changed; a tree someone
// reads is never written over.
func TestANewCommitIsWrittenOverTheLastTreeNobodyReads(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	e := newEnv(t, g, "team")
	o := e.opts("team/r", "team")
	first := e.commit(g, map[string]string{"a/x.yaml": "a1", "b/x.yaml": "b1"})
	firstDir, release, err := e.share.Checkout(ctx, o, first, nil)
	g.Expect(err).NotTo(HaveOccurred())
	unchanged, err := os.Stat(filepath.Join(firstDir, "b", "x.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	release()

	second := e.commit(g, map[string]string{"a/x.yaml": "a2"})
	secondDir, hold, err := e.share.Checkout(ctx, o, second, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(read(g, secondDir, "a/x.yaml")).To(Equal("a2"))
	g.Expect(read(g, secondDir, "b/x.yaml")).To(Equal("b1"))
	g.Expect(firstDir).NotTo(BeADirectory(), "the first tree became the second")
	now, err := os.Stat(filepath.Join(secondDir, "b", "x.yaml"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(os.SameFile(unchanged, now)).To(BeTrue(), "a file no commit changed is not written again")

	// A commit that cannot be fetched leaves the group's tree to its
	// readers: read again, it is the same tree, not fetched again.
	hold()
	fetches := e.srv.CountsOf("team").Fetches
	_, _, err = e.share.Checkout(ctx, o, strings.Repeat("ab", 20), nil)
	g.Expect(err).To(HaveOccurred())
	againDir, hold, err := e.share.Checkout(ctx, o, second, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(againDir).To(Equal(secondDir))
	g.Expect(read(g, againDir, "a/x.yaml")).To(Equal("a2"))
	g.Expect(e.srv.CountsOf("team").Fetches-fetches).To(BeNumerically("<=", 1), "only the failed fetch")

	// Read while the next commit arrives: written afresh, the read one
	// left as it is.
	third := e.commit(g, map[string]string{"a/x.yaml": "a3"})
	thirdDir, release, err := e.share.Checkout(ctx, o, third, nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(read(g, thirdDir, "a/x.yaml")).To(Equal("a3"))
	g.Expect(read(g, secondDir, "a/x.yaml")).To(Equal("a2"), "a tree being read is not written over")
	hold()
	g.Expect(secondDir).NotTo(BeADirectory())
	release()
}
