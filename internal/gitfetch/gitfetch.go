package gitfetch

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/config"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/client"
	githttp "github.com/go-git/go-git/v5/plumbing/transport/http"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
	"github.com/go-git/go-git/v5/storage/filesystem"
	"github.com/go-git/go-git/v5/storage/memory"
	corev1 "k8s.io/api/core/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/egress"
	"github.com/gitfleet/fleet/internal/outcome"
)

func init() {
	// Serve file paths and file:// URLs in process: go-git's own file
	// transport would run the git-upload-pack binary.
	client.InstallProtocol("file", server.NewClient(openLoader{}))
	// go-git keeps one HTTP client for the whole process: each request
	// connects through the Dialer its context carries (see withDialer).
	httpClient := githttp.NewClient(&http.Client{Transport: egress.ContextTransport()})
	client.InstallProtocol("http", httpClient)
	client.InstallProtocol("https", httpClient)
}

// withDialer makes ctx carry the Fetcher's Dialer, through which go-git's
// HTTP client connects (and the GitHub API is asked for tokens).
func (f *Fetcher) withDialer(ctx context.Context) context.Context {
	return egress.WithDialer(ctx, f.Dialer)
}

// sshProxy makes go-git's SSH transport, which takes no dialer, connect
// through the Dialer ctx carries: as a "proxy" that dials directly under
// its policy. None for other URLs, and when there is no Dialer.
func sshProxy(ctx context.Context, url string) transport.ProxyOptions {
	ep, err := transport.NewEndpoint(url)
	if err != nil || ep.Protocol != "ssh" {
		return transport.ProxyOptions{}
	}
	return transport.ProxyOptions{URL: egress.FromContext(ctx).ProxyURL()}
}

// openLoader opens local repositories, bare or with a worktree (go-git's
// filesystem loader reads a worktree's root instead of its .git).
type openLoader struct{}

func (openLoader) Load(ep *transport.Endpoint) (storer.Storer, error) {
	dir := ep.Path
	if fi, err := os.Stat(filepath.Join(dir, git.GitDirName)); err == nil && fi.IsDir() {
		dir = filepath.Join(dir, git.GitDirName)
	}
	// Served objects above largeObjectBytes stream, as in the cache.
	st := filesystem.NewStorageWithOptions(osfs.New(dir), cache.NewObjectLRU(objectCacheBytes),
		filesystem.Options{LargeObjectThreshold: largeObjectBytes})
	if _, err := git.Open(st, nil); err != nil {
		return nil, transport.ErrRepositoryNotFound
	}
	return st, nil
}

// Default time limits of one call.
const (
	DefaultListTimeout  = 30 * time.Second
	DefaultFetchTimeout = 2 * time.Minute
)

// Options say which repository and commit to fetch, and how.
type Options struct {
	// Key identifies the owner of the cache directory, e.g. a GitRepo's
	// "namespace/name".
	Key string
	// URL is the repository: https://, http://, ssh://, git@host:path, or a
	// local path or file:// URL.
	URL string
	// Branch to follow; empty follows the branch the remote HEAD points to.
	Branch string
	// Revision is a tag, a ref name or a full commit sha; it wins over Branch.
	Revision string
	// Secret holds the credentials: kubernetes.io/basic-auth (username,
	// password, or a token as password) or GitHub App credentials
	// (GitHubAppIDKey, GitHubAppInstallationIDKey, GitHubAppPrivateKeyKey)
	// for http(s), kubernetes.io/ssh-auth (ssh-privatekey, and known_hosts
	// unless KnownHosts has the host) for ssh.
	Secret *corev1.Secret
	// KnownHosts are host keys, in known_hosts format, trusted for ssh when
	// the Secret has no known_hosts key: Fleet's known-hosts ConfigMap.
	KnownHosts []byte
	// CABundle holds PEM certificates trusted in addition to the system's.
	CABundle []byte
	// InsecureSkipTLSVerify turns off TLS certificate verification.
	InsecureSkipTLSVerify bool
}

// Fetcher fetches repositories into a cache directory. It is safe for
// concurrent use; calls for the same Key and URL run one at a time.
type Fetcher struct {
	// CacheDir holds one directory per Key and URL.
	CacheDir string
	// ListTimeout bounds LatestCommit; default DefaultListTimeout.
	ListTimeout time.Duration
	// FetchTimeout bounds Checkout; default DefaultFetchTimeout.
	FetchTimeout time.Duration
	// AllowLocal allows local paths and file:// URLs. Off, they are refused:
	// they read whatever the manager can read, the git caches of other
	// GitRepos included.
	AllowLocal bool
	// GitHubAPIURL is the base URL of the GitHub API that mints installation
	// tokens for GitHub App credentials, e.g. https://api.github.com; default,
	// as in Fleet, https://api.<host of the repository>.
	GitHubAPIURL string
	// Dialer makes every connection to a repository (HTTP or SSH, and each
	// redirect) and to the GitHub API; nil connects anywhere. The manager
	// gives one with its outbound policy: tenants name these hosts.
	Dialer *egress.Dialer
	// Limits bound each fetch and checkout; zero fields take the defaults.
	Limits Limits

	mu     sync.Mutex
	locks  map[string]*sync.Mutex
	tokens map[tokenKey]cachedToken
	// refused remembers, per cache directory, the commit a limit refused
	// and why: it is not fetched again until the commit changes.
	refused map[string]refusal
}

// refusal is a commit refused for a limit.
type refusal struct {
	commit string
	limits Limits
	err    error
}

// LatestCommit returns the commit the options point to on the remote now: the
// tip of the branch, the commit of the tag, or the revision itself when it is
// a full sha (without asking the remote).
func (f *Fetcher) LatestCommit(ctx context.Context, o Options) (string, error) {
	ctx = f.withDialer(ctx)
	if isFullSHA(o.Revision) {
		if _, _, err := f.prepare(ctx, o); err != nil {
			return "", err
		}
		return strings.ToLower(o.Revision), nil
	}
	_, hash, err := f.resolve(ctx, o)
	if err != nil {
		return "", err
	}
	return hash.String(), nil
}

// resolve lists the remote's refs and finds the one the options point to.
func (f *Fetcher) resolve(ctx context.Context, o Options) (plumbing.ReferenceName, plumbing.Hash, error) {
	ep, auth, err := f.prepare(ctx, o)
	if err != nil {
		return "", plumbing.ZeroHash, err
	}
	ctx, cancel := context.WithTimeout(ctx, orDefault(f.ListTimeout, DefaultListTimeout))
	defer cancel()
	remote := git.NewRemote(memory.NewStorage(), &config.RemoteConfig{Name: git.DefaultRemoteName, URLs: []string{o.URL}})
	refs, err := remote.ListContext(ctx, &git.ListOptions{
		Auth:            auth,
		CABundle:        o.CABundle,
		InsecureSkipTLS: o.InsecureSkipTLSVerify,
		PeelingOption:   git.AppendPeeled,
		ProxyOptions:    sshProxy(ctx, o.URL),
	})
	if err != nil {
		return "", plumbing.ZeroHash, classify(o.URL, "listing the refs of", err)
	}
	name, hash, err := Resolve(refs, o.URL, o.Branch, o.Revision)
	if err == nil && ep.Protocol == "file" {
		hash = peelLocal(ep.Path, hash)
	}
	return name, hash, err
}

// peelLocal turns an annotated tag into its commit: go-git's in-process
// server, unlike git, advertises no peeled tags.
func peelLocal(path string, h plumbing.Hash) plumbing.Hash {
	r, err := git.PlainOpen(path)
	if err != nil {
		return h
	}
	tag, err := r.TagObject(h)
	if err != nil {
		return h
	}
	c, err := tag.Commit()
	if err != nil {
		return h
	}
	return c.Hash
}

// Resolve finds, in the refs a remote advertised, the ref that branch or
// revision names (revision wins; neither means the remote HEAD's branch) and
// the commit it points to, peeling annotated tags.
func Resolve(refs []*plumbing.Reference, repo, branch, revision string) (plumbing.ReferenceName, plumbing.Hash, error) {
	byName := map[plumbing.ReferenceName]*plumbing.Reference{}
	for _, r := range refs {
		byName[r.Name()] = r
	}
	hashOf := func(name plumbing.ReferenceName) (plumbing.Hash, bool) {
		if peeled, ok := byName[name+"^{}"]; ok {
			return peeled.Hash(), true
		}
		if r, ok := byName[name]; ok && r.Type() == plumbing.HashReference {
			return r.Hash(), true
		}
		return plumbing.ZeroHash, false
	}
	switch {
	case revision != "":
		candidates := []plumbing.ReferenceName{plumbing.NewTagReferenceName(revision), plumbing.NewBranchReferenceName(revision)}
		if strings.HasPrefix(revision, "refs/") {
			candidates = []plumbing.ReferenceName{plumbing.ReferenceName(revision)}
		}
		for _, name := range candidates {
			if h, ok := hashOf(name); ok {
				return name, h, nil
			}
		}
		return "", plumbing.ZeroHash, outcome.Stallf(fleet.ReasonRevisionNotFound,
			"revision %s not found in %s: use an existing tag or a full 40-character commit sha", revision, repo)
	case branch != "":
		name := plumbing.NewBranchReferenceName(branch)
		if h, ok := hashOf(name); ok {
			return name, h, nil
		}
		return "", plumbing.ZeroHash, outcome.Stallf(fleet.ReasonBranchNotFound, "branch %s not found in %s", branch, repo)
	default:
		head, ok := byName[plumbing.HEAD]
		if !ok {
			return "", plumbing.ZeroHash, outcome.Stallf(fleet.ReasonBranchNotFound, "%s has no HEAD: set spec.branch", repo)
		}
		if head.Type() == plumbing.HashReference {
			return plumbing.HEAD, head.Hash(), nil
		}
		if h, ok := hashOf(head.Target()); ok {
			return plumbing.HEAD, h, nil
		}
		return "", plumbing.ZeroHash, outcome.Stallf(fleet.ReasonBranchNotFound,
			"the default branch %s of %s does not exist: set spec.branch", head.Target().Short(), repo)
	}
}

// errIncomplete says the cached repository lacks the commit or some of its
// objects after a shallow fetch: it is rebuilt with a full one.
var errIncomplete = errors.New("incomplete fetch")

// Checkout fetches commit into the cache and returns a directory holding its
// files (without .git). The directory stays valid until the next Checkout or
// Remove with the same Key and URL.
func (f *Fetcher) Checkout(ctx context.Context, o Options, commit string) (string, error) {
	return f.CheckoutOver(ctx, o, commit, nil)
}

// CheckoutOver is Checkout writing over an earlier checkout of the same
// repository, which takeBase hands over (see Base) once the commit is
// fetched and its files are about to be written, and not before: the files
// the two commits share are not written again. A Base handed over is gone
// when CheckoutOver returns, used or deleted, whatever the outcome;
// takeBase is called at most once.
func (f *Fetcher) CheckoutOver(ctx context.Context, o Options, commit string, takeBase func() Base) (string, error) {
	var over Base
	defer func() {
		// Moved into the checkout when it was used: then there is
		// nothing left to delete.
		if over.Dir != "" {
			_ = os.RemoveAll(over.Dir)
		}
	}()
	if !isFullSHA(commit) {
		return "", fmt.Errorf("checkout of %s: %q is not a full commit sha", o.URL, commit)
	}
	ctx = f.withDialer(ctx)
	hash := plumbing.NewHash(commit)
	base, err := f.dir(o)
	if err != nil {
		return "", err
	}
	unlock := f.lock(filepath.Dir(base))
	defer unlock()
	if err := removeOthers(filepath.Dir(base), filepath.Base(base)); err != nil {
		return "", err
	}
	work, marker := filepath.Join(base, "work"), filepath.Join(base, "work.commit")
	//nolint:gosec // G304: marker is in the fetcher's CacheDir, named by a hash of the URL
	if done, err := os.ReadFile(marker); err == nil && string(done) == hash.String() {
		if _, err := os.Stat(work); err == nil {
			return work, nil
		}
	}

	limits := f.Limits.withDefaults()
	if err := f.refusedBefore(base, commit, limits); err != nil {
		return "", err
	}
	ep, auth, err := f.prepare(ctx, o)
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, orDefault(f.FetchTimeout, DefaultFetchTimeout))
	defer cancel()
	refspecs, err := f.refSpecs(ctx, o)
	if err != nil {
		return "", err
	}
	shallow := ep.Protocol != "file" && !isFullSHA(o.Revision)
	repoDir := filepath.Join(base, "repo.git")
	fc := fetchCall{dir: repoDir, o: o, auth: auth, hash: hash, refspecs: refspecs, limits: limits}
	repo, err := fc.fetch(ctx, shallow)
	// The earlier checkout is taken only now the commit is here: a failed
	// fetch leaves it to its readers.
	taken := false
	take := func() Base {
		if !taken && takeBase != nil {
			taken, over = true, takeBase()
		}
		return over
	}
	if err == nil {
		err = writeTree(ctx, repo, hash, work+".tmp", limits, take())
		closeRepo(repo)
	}
	if errors.Is(err, errIncomplete) {
		if err := os.RemoveAll(repoDir); err != nil {
			return "", err
		}
		if repo, err = fc.fetch(ctx, false); err == nil {
			err = writeTree(ctx, repo, hash, work+".tmp", limits, take())
			closeRepo(repo)
		}
	}
	if err = stallOnLimit(o.URL, commit, err); outcome.ReasonOf(err, "") == fleet.ReasonGitLimitExceeded {
		f.refuse(base, refusal{commit: commit, limits: limits, err: err})
		_ = os.RemoveAll(work + ".tmp")
		return "", err
	}
	if errors.Is(err, errIncomplete) {
		if isFullSHA(o.Revision) {
			return "", outcome.Stallf(fleet.ReasonRevisionNotFound, "revision %s not found in %s: use a commit that is on a branch or tag of the repository", o.Revision, o.URL)
		}
		return "", fmt.Errorf("commit %s is no longer in %s (force-pushed?): the next poll picks up the new tip", commit, o.URL)
	}
	if err != nil {
		return "", err
	}
	if err := os.RemoveAll(work); err != nil {
		return "", err
	}
	if err := os.Rename(work+".tmp", work); err != nil {
		return "", err
	}
	if err := os.WriteFile(marker, []byte(hash.String()), 0o600); err != nil {
		return "", err
	}
	return work, nil
}

// Remove deletes the cache of key, for every URL.
func (f *Fetcher) Remove(key string) error {
	dir, err := f.keyDir(key)
	if err != nil {
		return err
	}
	unlock := f.lock(dir)
	defer unlock()
	f.mu.Lock()
	for k := range f.refused {
		if filepath.Dir(k) == dir {
			delete(f.refused, k)
		}
	}
	f.mu.Unlock()
	return os.RemoveAll(dir)
}

// refusedBefore returns the error of the last Checkout in the cache
// directory base when a limit refused the same commit under the same limits.
func (f *Fetcher) refusedBefore(base, commit string, limits Limits) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if r, ok := f.refused[base]; ok && r.commit == commit && r.limits == limits {
		return r.err
	}
	return nil
}

func (f *Fetcher) refuse(base string, r refusal) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.refused == nil {
		f.refused = map[string]refusal{}
	}
	f.refused[base] = r
}

// refSpecs says what to fetch to get the commit the options point to.
func (f *Fetcher) refSpecs(ctx context.Context, o Options) ([]config.RefSpec, error) {
	switch {
	case isFullSHA(o.Revision):
		return []config.RefSpec{"+refs/heads/*:refs/remotes/origin/*", "+refs/tags/*:refs/tags/*"}, nil
	case o.Revision != "":
		name, _, err := f.resolve(ctx, o)
		if err != nil {
			return nil, err
		}
		return []config.RefSpec{config.RefSpec(fmt.Sprintf("+%s:%s", name, name))}, nil
	case o.Branch != "":
		return []config.RefSpec{config.RefSpec(fmt.Sprintf("+refs/heads/%s:refs/remotes/origin/%s", o.Branch, o.Branch))}, nil
	default:
		return []config.RefSpec{"+HEAD:refs/remotes/origin/HEAD"}, nil
	}
}

// fetchCall fetches one commit into one cached repository.
type fetchCall struct {
	dir      string
	o        Options
	auth     transport.AuthMethod
	hash     plumbing.Hash
	refspecs []config.RefSpec
	limits   Limits
}

// fetch opens (or creates) the cached repository and fetches into it unless
// it already has the commit. A shallow fetch is tried for a new or still
// shallow repository; errIncomplete asks for a full one instead. The
// caller closes the repository it returns (closeRepo).
func (c fetchCall) fetch(ctx context.Context, shallow bool) (_ *git.Repository, err error) {
	repo, fresh, err := openOrInit(ctx, c.dir, c.o.URL, c.limits)
	if err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			closeRepo(repo)
		}
	}()
	if hasCommit(repo, c.hash) {
		return repo, nil
	}
	// Each fetch adds a pack, and every pack's index is read when the
	// cache is opened: past maxPacks the cache starts over, with a shallow
	// fetch where the remote allows one, rather than grow without end.
	if ps, ok := repo.Storer.(storer.PackedObjectStorer); ok && tooManyPacks(ps) {
		closeRepo(repo)
		repo = nil
		if err := os.RemoveAll(c.dir); err != nil {
			return nil, err
		}
		if repo, fresh, err = openOrInit(ctx, c.dir, c.o.URL, c.limits); err != nil {
			return nil, err
		}
	}
	if hasCommit(repo, c.hash) {
		return repo, nil
	}
	depth := 0
	if shallow {
		if fresh || isShallow(repo) {
			depth = 1
		}
	}
	err = repo.FetchContext(ctx, &git.FetchOptions{
		RemoteName:      git.DefaultRemoteName,
		RefSpecs:        c.refspecs,
		Depth:           depth,
		Auth:            c.auth,
		CABundle:        c.o.CABundle,
		InsecureSkipTLS: c.o.InsecureSkipTLSVerify,
		ProxyOptions:    sshProxy(ctx, c.o.URL),
		Tags:            git.NoTags,
		Force:           true,
	})
	if errors.Is(err, git.NoErrAlreadyUpToDate) {
		err = nil
	}
	if err != nil {
		// A refused or broken pack leaves go-git's temporary file behind.
		removeTempPacks(c.dir)
	}
	var le *LimitError
	if errors.As(err, &le) {
		return nil, le
	}
	var noMatch git.NoMatchingRefSpecError
	if errors.As(err, &noMatch) {
		what := "branch " + c.o.Branch
		if c.o.Revision != "" {
			what = "revision " + c.o.Revision
		}
		return nil, outcome.Stallf(fleet.ReasonBranchNotFound, "%s not found in %s", what, c.o.URL)
	}
	if err != nil {
		answered := !isNetworkError(err)
		err = classify(c.o.URL, "fetching", err)
		// A shallow fetch that failed, or a fetch into an existing cache
		// that the remote refused (the cache's history was replaced at the
		// same URL: the remote does not know the commits it offers), is
		// tried again from an empty cache. A network failure keeps the
		// cache: the next poll resumes from it.
		if (depth > 0 || (!fresh && answered)) && !outcome.IsStalling(err) && ctx.Err() == nil {
			return nil, errIncomplete
		}
		return nil, err
	}
	if !hasCommit(repo, c.hash) {
		return nil, errIncomplete
	}
	return repo, nil
}

// Bounds of the object store of a cached repository: objects above
// largeObjectBytes are read as they inflate, never whole, at most
// objectCacheBytes of decoded objects are kept while it is open, and at most
// openPacks of its packs stay open while it is (not one open per object
// read). Past maxPacks packs (one per fetch) it is fetched anew.
const (
	largeObjectBytes = 1 << 20
	objectCacheBytes = 16 << 20
	openPacks        = 16
	maxPacks         = 64
)

// openOrInit opens the cached bare repository in dir, or creates it anew
// when missing or for another URL. Its object store takes packs only
// through a packGuard with limits, and stops with ctx. Only the fetcher
// writes the cache, under its lock (ExclusiveAccess: the lists of packs and
// loose objects are read once, not at each object). The caller closes it
// (closeRepo).
func openOrInit(ctx context.Context, dir, url string, limits Limits) (*git.Repository, bool, error) {
	open := func() *guardedStorage {
		st := filesystem.NewStorageWithOptions(osfs.New(dir), cache.NewObjectLRU(objectCacheBytes),
			filesystem.Options{LargeObjectThreshold: largeObjectBytes, ExclusiveAccess: true, MaxOpenDescriptors: openPacks})
		return &guardedStorage{Storage: st, ctx: ctx, limits: limits}
	}
	repo, err := git.Open(open(), nil)
	if err == nil {
		if remote, err := repo.Remote(git.DefaultRemoteName); err == nil && len(remote.Config().URLs) == 1 && remote.Config().URLs[0] == url {
			return repo, false, nil
		}
		closeRepo(repo)
	}
	if err := os.RemoveAll(dir); err != nil {
		return nil, false, err
	}
	if err := os.MkdirAll(filepath.Dir(dir), 0o700); err != nil {
		return nil, false, err
	}
	repo, err = git.Init(open(), nil)
	if err != nil {
		return nil, false, fmt.Errorf("creating the git cache in %s: %w", dir, err)
	}
	if _, err := repo.CreateRemote(&config.RemoteConfig{Name: git.DefaultRemoteName, URLs: []string{url}}); err != nil {
		return nil, false, fmt.Errorf("creating the git cache in %s: %w", dir, err)
	}
	return repo, true, nil
}

// tooManyPacks says whether a cached repository holds more than maxPacks
// packs.
func tooManyPacks(ps storer.PackedObjectStorer) bool {
	packs, err := ps.ObjectPacks()
	return err == nil && len(packs) > maxPacks
}

// closeRepo closes the files a cached repository holds open (nil: none).
func closeRepo(repo *git.Repository) {
	if repo == nil {
		return
	}
	if c, ok := repo.Storer.(io.Closer); ok {
		_ = c.Close()
	}
}

// removeTempPacks deletes the temporary packs of failed fetches in the
// cached repository dir.
func removeTempPacks(dir string) {
	tmp, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "tmp_pack_*"))
	for _, p := range tmp {
		_ = os.Remove(p)
	}
}

// isNetworkError says whether err came from the connection rather than from
// what the remote answered.
func isNetworkError(err error) bool {
	var ne net.Error
	return errors.As(err, &ne)
}

func hasCommit(repo *git.Repository, h plumbing.Hash) bool {
	_, err := repo.CommitObject(h)
	return err == nil
}

func isShallow(repo *git.Repository) bool {
	s, err := repo.Storer.Shallow()
	return err == nil && len(s) > 0
}

// localDisabled is the message of the error for a local repository when
// they are not allowed.
const localDisabled = "local repository %s refused: local paths and file:// URLs are disabled, " +
	"use an http(s) or ssh URL (an operator may allow them with the manager's --allow-local-repos)"

// prepare parses the URL and builds the credentials.
func (f *Fetcher) prepare(ctx context.Context, o Options) (*transport.Endpoint, transport.AuthMethod, error) {
	if o.URL == "" {
		return nil, nil, outcome.Stallf(fleet.ReasonInvalidOptions, "no repository URL: set spec.repo")
	}
	ep, err := transport.NewEndpoint(o.URL)
	if err != nil {
		return nil, nil, outcome.Stallf(fleet.ReasonInvalidOptions, "invalid repository URL %s: %w", o.URL, err)
	}
	if ep.Protocol == "file" && !f.AllowLocal {
		return nil, nil, outcome.Stallf(fleet.ReasonLocalRepoDisabled, localDisabled, o.URL)
	}
	auth, err := f.authMethod(ctx, ep, o)
	if err != nil {
		return nil, nil, err
	}
	return ep, auth, nil
}

// dir is the cache directory of the options' Key and URL.
func (f *Fetcher) dir(o Options) (string, error) {
	kd, err := f.keyDir(o.Key)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256([]byte(o.URL))
	return filepath.Join(kd, hex.EncodeToString(sum[:])[:16]), nil
}

func (f *Fetcher) keyDir(key string) (string, error) {
	if f.CacheDir == "" {
		return "", errors.New("gitfetch: no CacheDir set")
	}
	if key == "" || !filepath.IsLocal(key) {
		sum := sha256.Sum256([]byte(key))
		key = hex.EncodeToString(sum[:])[:16]
	}
	return filepath.Join(f.CacheDir, key), nil
}

// lock serialises work on the cache directory of one key.
func (f *Fetcher) lock(dir string) func() {
	f.mu.Lock()
	if f.locks == nil {
		f.locks = map[string]*sync.Mutex{}
	}
	l, ok := f.locks[dir]
	if !ok {
		l = &sync.Mutex{}
		f.locks[dir] = l
	}
	f.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// removeOthers deletes the caches of the key's earlier URLs.
func removeOthers(dir, keep string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() != keep {
			if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	return nil
}

func isFullSHA(s string) bool {
	if len(s) != 40 {
		return false
	}
	_, err := hex.DecodeString(s)
	return err == nil
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}
