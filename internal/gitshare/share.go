package gitshare

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/gitfleet/fleet/internal/gitfetch"
)

// DefaultMaxTreeBytes is the default budget of the commit trees kept on
// disk.
const DefaultMaxTreeBytes = 512 << 20

// Source asks the remote and fetches: *gitfetch.Fetcher. The Share calls it
// with the group as Options.Key, so the group's object store is one cache
// directory of it. CheckoutOver writes a commit's files over an earlier tree
// of the group (gitfetch.Base), writing only the files that differ: the
// Share hands it the group's last tree when nobody reads it, once the commit
// is fetched (a failed fetch leaves the tree to its readers).
type Source interface {
	LatestCommit(ctx context.Context, o gitfetch.Options) (string, error)
	CheckoutOver(ctx context.Context, o gitfetch.Options, commit string, base func() gitfetch.Base) (string, error)
	Remove(key string) error
}

// Query says how fresh an answer of LatestCommit must be.
type Query struct {
	// MaxAge is how old an answer the group already has may be to be
	// reused: the caller's polling interval, so that the group asks the
	// remote once per interval. Zero always asks.
	MaxAge time.Duration
	// Renew says the caller polls at its interval, after an answer it took:
	// that answer does not do again, so that each such poll learns
	// something newer than the last (a GitRepo alone asks the remote at
	// every interval). A retry or a spec change takes the group's answer
	// as it is.
	Renew bool
	// Want is a commit a webhook announced: an answer that is not it is
	// reused only when the remote was asked after the group first heard of
	// it, so that N GitRepos told of one push ask the remote once.
	Want string
	// Gate, when set, is asked before the remote is (see Gate).
	Gate Gate
}

// Gate is asked for leave before the Share calls its Source on a caller's
// behalf (an ls-remote, a fetch, a checkout into the tree directory): it
// returns the function that gives the leave back once that call is over, or
// an error, which the Share returns to the caller at once without calling
// the Source. An answer or a tree the group has already, and a call of the
// group already under way (the caller waits for its result), need no leave:
// a caller is held back by its own network work only, not by its group's.
// A Gate must not block.
type Gate func() (release func(), err error)

// Share answers LatestCommit and Checkout for many callers (Options.Key:
// one GitRepo each), asking its Source once per group (see Group). It is
// safe for concurrent use.
type Share struct {
	// Source asks the remote and fetches.
	Source Source
	// TreeDir holds the commit trees, one directory per group and commit;
	// it must be on the Source's file system (trees are renamed into it).
	// What it holds when the Share starts is deleted.
	TreeDir string
	// MaxTreeBytes bounds the trees kept when no reader holds them;
	// default DefaultMaxTreeBytes.
	MaxTreeBytes int64
	// Now is the clock; default time.Now.
	Now func() time.Time
	// Changed, when set, is told the other callers of a group whose answer
	// changed (a new commit): they may ask again now and get it from the
	// group, instead of at their next poll, up to an interval later. It
	// must not block.
	Changed func(keys []string)

	start     sync.Once
	startErr  error
	mu        sync.Mutex
	groups    map[string]*group
	members   map[string]string
	trees     map[treeKey]*tree
	treeBytes int64
	clock     int64
	seq       int64
	fetching  map[string]*sync.Mutex
	lists     flights[string]
	checkouts flights[treeKey]
}

// group is what the Share knows of one group.
type group struct {
	// members are the callers reading the group, each with the time of
	// the last answer it took (zero before its first).
	members map[string]time.Time
	// latest is the remote's last answer, asked at at.
	latest string
	at     time.Time
	// want is the last commit a webhook announced, first heard of at
	// wantAt.
	want   string
	wantAt time.Time
}

type treeKey struct{ group, commit string }

// tree is a commit's files on disk.
type tree struct {
	dir    string
	bytes  int64
	leases int
	used   int64
	// gone says the tree is evicted: it is deleted when its last lease
	// is released.
	gone bool
}

// LatestCommit returns the commit o points to on the remote, asking the
// remote with o's credentials unless the group has an answer q accepts.
func (s *Share) LatestCommit(ctx context.Context, o gitfetch.Options, q Query) (string, error) {
	if err := s.init(); err != nil {
		return "", err
	}
	id := Group(o)
	now := s.now()
	s.mu.Lock()
	g := s.join(o.Key, id)
	if g.fresh(q, now, g.members[o.Key]) {
		c := g.latest
		g.members[o.Key] = g.at
		s.mu.Unlock()
		return c, nil
	}
	if q.Want != "" && q.Want != g.want {
		g.want, g.wantAt = q.Want, now
	}
	seen := g.at
	s.mu.Unlock()
	key := o.Key
	c, err := s.lists.do(ctx, id, q.Gate, func() (string, error) {
		// Another caller's run may have ended between the check above and
		// this one (the caller was not there to wait for it): its new
		// answer does, as it would have had the caller waited. Without this, a
		// push told to a group asked the remote twice.
		s.mu.Lock()
		if !g.at.Equal(seen) && g.fresh(q, s.now(), g.members[key]) {
			c := g.latest
			s.mu.Unlock()
			return c, nil
		}
		s.mu.Unlock()
		asked := s.now()
		o.Key = id
		c, err := s.Source.LatestCommit(ctx, o)
		if err != nil {
			return c, err
		}
		s.mu.Lock()
		changed := g.latest != "" && g.latest != c
		g.latest, g.at = c, asked
		var others []string
		if changed && s.Changed != nil {
			for k := range g.members {
				if k != key {
					others = append(others, k)
				}
			}
		}
		s.mu.Unlock()
		if len(others) > 0 {
			s.Changed(others)
		}
		return c, nil
	})
	if err == nil {
		// Taken by every caller of the flight, the one that asked or not.
		s.mu.Lock()
		if _, ok := g.members[key]; ok {
			g.members[key] = g.at
		}
		s.mu.Unlock()
	}
	return c, err
}

// fresh says whether the group's answer does for q, asked by a member
// that last took the answer asked at taken: younger than q.MaxAge and, for
// a renewing poll, not taken yet.
func (g *group) fresh(q Query, now, taken time.Time) bool {
	switch {
	case g.latest == "":
		return false
	case q.Want != "":
		return g.latest == q.Want || (g.want == q.Want && !g.at.Before(g.wantAt))
	default:
		return q.MaxAge > 0 && now.Sub(g.at) < q.MaxAge && (!q.Renew || g.at.After(taken))
	}
}

// Checkout returns a directory holding the files of commit, fetched with
// o's credentials unless the group has them already, and a release to call
// once done reading it: the directory is not deleted before. gate, when
// set, is asked before the files are fetched or written (see Gate).
func (s *Share) Checkout(ctx context.Context, o gitfetch.Options, commit string, gate Gate) (string, func(), error) {
	if err := s.init(); err != nil {
		return "", nil, err
	}
	id := Group(o)
	s.mu.Lock()
	s.join(o.Key, id)
	s.mu.Unlock()
	k := treeKey{group: id, commit: commit}
	// A tree can be evicted between its fetch and the lease of a waiter:
	// it is then written again, from the object store, not the network.
	for range 3 {
		if dir, release, ok := s.lease(k); ok {
			return dir, release, nil
		}
		if _, err := s.checkouts.do(ctx, k, gate, func() (string, error) { return s.checkout(ctx, o, k) }); err != nil {
			return "", nil, err
		}
	}
	return "", nil, fmt.Errorf("the files of commit %s of %s were evicted before they could be read: the git tree cache (MaxTreeBytes) is too small for the repositories read at once", commit, o.URL)
}

// checkout fetches the tree of k into TreeDir, one group at a time (the
// Source writes a group's files into one place).
func (s *Share) checkout(ctx context.Context, o gitfetch.Options, k treeKey) (string, error) {
	unlock := s.lockGroup(k.group)
	defer unlock()
	if _, _, ok := s.peek(k); ok {
		return "", nil
	}
	o.Key = k.group
	work, err := s.Source.CheckoutOver(ctx, o, k.commit, func() gitfetch.Base { return s.takeBase(k) })
	if err != nil {
		return "", err
	}
	// A directory of its own: an evicted tree of the same commit still
	// leased is deleted at its last release, not this one.
	s.mu.Lock()
	s.seq++
	dst := filepath.Join(s.TreeDir, k.group, k.commit+"."+strconv.FormatInt(s.seq, 10))
	s.mu.Unlock()
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return "", err
	}
	if err := os.Rename(work, dst); err != nil {
		return "", fmt.Errorf("keeping the files of commit %s: %w", k.commit, err)
	}
	size, err := du(dst)
	if err != nil {
		return "", err
	}
	s.add(k, &tree{dir: dst, bytes: size})
	return dst, nil
}

// Remove says the caller key (a deleted GitRepo) reads no more; a group
// nobody reads any more is deleted: its answer, its trees and its object
// store.
func (s *Share) Remove(key string) error {
	s.mu.Lock()
	id, ok := s.members[key]
	var empty bool
	if ok {
		delete(s.members, key)
		empty = s.leave(key, id)
	}
	s.mu.Unlock()
	if !empty {
		return nil
	}
	return s.dropSource(id)
}

// join records that key reads group id (and no longer the one it read
// before) and returns the group. s.mu is held.
func (s *Share) join(key, id string) *group {
	if s.groups == nil {
		s.groups, s.members = map[string]*group{}, map[string]string{}
	}
	if old, ok := s.members[key]; ok && old != id && s.leave(key, old) {
		// Its credentials or URL changed: the old group may go. Its
		// object store is deleted in the background, not under s.mu.
		go func() { _ = s.dropSource(old) }()
	}
	g, ok := s.groups[id]
	if !ok {
		g = &group{members: map[string]time.Time{}}
		s.groups[id] = g
	}
	if _, ok := g.members[key]; !ok {
		g.members[key] = time.Time{}
	}
	s.members[key] = id
	return g
}

// leave removes key from group id and, when it was the last, forgets the
// group and evicts its trees; it reports whether the group is gone. s.mu is
// held.
func (s *Share) leave(key, id string) bool {
	g, ok := s.groups[id]
	if !ok {
		return false
	}
	delete(g.members, key)
	if len(g.members) > 0 {
		return false
	}
	delete(s.groups, id)
	var dirs []string
	for k, t := range s.trees {
		if k.group == id {
			dirs = append(dirs, s.evict(k, t)...)
		}
	}
	removeAll(dirs)
	return true
}

// dropSource deletes the object store of a group, unless a member came
// back meanwhile.
func (s *Share) dropSource(id string) error {
	unlock := s.lockGroup(id)
	defer unlock()
	s.mu.Lock()
	_, back := s.groups[id]
	s.mu.Unlock()
	if back {
		return nil
	}
	if err := s.Source.Remove(id); err != nil {
		return fmt.Errorf("removing the git cache of an unused repository: %w", err)
	}
	return nil
}

// takeBase hands over a tree of k's group that nobody reads, for k's files
// to be written over: it is forgotten, and its directory is the Source's
// now. None (a zero Base) when it is read, or there is none (the group
// keeps one commit's tree: add evicts the others).
func (s *Share) takeBase(k treeKey) gitfetch.Base {
	s.mu.Lock()
	defer s.mu.Unlock()
	for tk, t := range s.trees {
		if tk.group != k.group || tk.commit == k.commit || t.leases > 0 || t.gone {
			continue
		}
		delete(s.trees, tk)
		s.treeBytes -= t.bytes
		t.gone = true
		return gitfetch.Base{Dir: t.dir, Commit: tk.commit}
	}
	return gitfetch.Base{}
}

// lease takes a lease on the tree of k, if it is there.
func (s *Share) lease(k treeKey) (string, func(), bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.trees[k]
	if !ok || t.gone {
		return "", nil, false
	}
	if _, err := os.Stat(t.dir); err != nil {
		// Deleted by someone else (a cleaner of temporary directories):
		// forgotten, and written again from the object store.
		removeAll(s.evict(k, t))
		return "", nil, false
	}
	t.leases++
	s.clock++
	t.used = s.clock
	var once sync.Once
	return t.dir, func() { once.Do(func() { s.release(t) }) }, true
}

func (s *Share) peek(k treeKey) (string, int64, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.trees[k]
	if !ok || t.gone {
		return "", 0, false
	}
	return t.dir, t.bytes, true
}

// release ends a lease: an evicted tree is deleted with its last one,
// and trees beyond the budget (kept while they were read) go.
func (s *Share) release(t *tree) {
	s.mu.Lock()
	t.leases--
	var dirs []string
	if t.gone && t.leases == 0 {
		dirs = append(dirs, t.dir)
	}
	dirs = append(dirs, s.overBudget(treeKey{})...)
	s.mu.Unlock()
	removeAll(dirs)
}

// add keeps a new tree, evicting the group's older commits (the group
// follows one branch: they are read no more) and then, least recently used
// first, whatever is beyond the budget.
func (s *Share) add(k treeKey, t *tree) {
	s.mu.Lock()
	if s.trees == nil {
		s.trees = map[treeKey]*tree{}
	}
	var dirs []string
	if _, member := s.groups[k.group]; !member {
		// The last reader left while it was fetched.
		t.gone = true
		dirs = append(dirs, t.dir)
	} else {
		for ok, ot := range s.trees {
			if ok.group == k.group && ok.commit != k.commit {
				dirs = append(dirs, s.evict(ok, ot)...)
			}
		}
		s.clock++
		t.used = s.clock
		s.trees[k] = t
		s.treeBytes += t.bytes
		dirs = append(dirs, s.overBudget(k)...)
	}
	s.mu.Unlock()
	removeAll(dirs)
}

// overBudget evicts the least recently used trees no one reads while the
// trees take more than the budget, sparing keep. s.mu is held.
func (s *Share) overBudget(keep treeKey) []string {
	limit := s.MaxTreeBytes
	if limit <= 0 {
		limit = DefaultMaxTreeBytes
	}
	var dirs []string
	for s.treeBytes > limit {
		var oldest treeKey
		var ot *tree
		for k, t := range s.trees {
			if k != keep && t.leases == 0 && (ot == nil || t.used < ot.used) {
				oldest, ot = k, t
			}
		}
		if ot == nil {
			break
		}
		dirs = append(dirs, s.evict(oldest, ot)...)
	}
	return dirs
}

// evict forgets a tree and returns its directory to delete now, or
// nothing when it is leased (its last release deletes it). s.mu is held.
func (s *Share) evict(k treeKey, t *tree) []string {
	delete(s.trees, k)
	s.treeBytes -= t.bytes
	t.gone = true
	if t.leases > 0 {
		return nil
	}
	return []string{t.dir}
}

// lockGroup serialises fetches of one group.
func (s *Share) lockGroup(id string) func() {
	s.mu.Lock()
	if s.fetching == nil {
		s.fetching = map[string]*sync.Mutex{}
	}
	l, ok := s.fetching[id]
	if !ok {
		l = &sync.Mutex{}
		s.fetching[id] = l
	}
	s.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// init deletes the trees a previous process left.
func (s *Share) init() error {
	s.start.Do(func() {
		if s.Source == nil || s.TreeDir == "" {
			s.startErr = errors.New("gitshare: no Source or TreeDir set")
			return
		}
		s.startErr = os.RemoveAll(s.TreeDir)
	})
	return s.startErr
}

func (s *Share) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// du is the bytes of the files below dir.
func du(dir string) (int64, error) {
	var n int64
	err := filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type().IsRegular() {
			fi, err := d.Info()
			if err != nil {
				return err
			}
			n += fi.Size()
		}
		return nil
	})
	return n, err
}

func removeAll(dirs []string) {
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
}

// flights runs one call per key at a time; callers that come while it
// runs wait for its result.
type flights[K comparable] struct {
	mu sync.Mutex
	m  map[K]*flight
}

type flight struct {
	done chan struct{}
	val  string
	err  error
}

// do runs fn for k, or waits for the run already under way. Only a run
// asks gate (when set) for leave first: when it refuses, its error is
// returned and nothing runs. A waiter whose ctx ends stops waiting; the run
// goes on for the others.
func (f *flights[K]) do(ctx context.Context, k K, gate Gate, fn func() (string, error)) (string, error) {
	f.mu.Lock()
	if c, ok := f.m[k]; ok {
		f.mu.Unlock()
		select {
		case <-c.done:
			return c.val, c.err
		case <-ctx.Done():
			return "", ctx.Err()
		}
	}
	leave := func() {}
	if gate != nil {
		// Under f.mu, so that no run of k starts meanwhile and the
		// caller holds a leave it does not need; a Gate does not block.
		release, err := gate()
		if err != nil {
			f.mu.Unlock()
			return "", err
		}
		if release != nil {
			leave = release
		}
	}
	if f.m == nil {
		f.m = map[K]*flight{}
	}
	c := &flight{done: make(chan struct{})}
	f.m[k] = c
	f.mu.Unlock()
	defer func() {
		f.mu.Lock()
		delete(f.m, k)
		f.mu.Unlock()
		close(c.done)
		leave()
	}()
	c.val, c.err = fn()
	return c.val, c.err
}
