package gitfetch_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io/fs"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	. "github.com/onsi/gomega"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/gitfetch"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/internal/outcome"
)

// heapPeak samples the live heap until stop is called, and returns its
// highest value above the heap at the start.
func heapPeak() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	base := read()
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			if v := read(); v > base && v-base > peak {
				peak = v - base
			}
			select {
			case <-done:
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
	return func() uint64 { close(done); wg.Wait(); return peak }
}

func limitErr(g *WithT, err error, limit string, more ...string) {
	g.Expect(err).To(HaveOccurred())
	g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonGitLimitExceeded), err.Error())
	g.Expect(err.Error()).To(ContainSubstring("git " + limit + " limit exceeded"))
	for _, m := range more {
		g.Expect(err.Error()).To(ContainSubstring(m))
	}
}

// A repository holding 512 MiB of zeros (half a MiB compressed) is refused
// as the pack streams in: the manager's heap does not grow by the file, the
// file is named, nothing large is left in the cache, and the same commit is
// not fetched again.
func TestCheckoutRefusesZipBomb(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	r := newRepo(t, g, root, "bomb")
	sha, err := r.CommitLarge("bomb", map[string]string{"app/fleet.yaml": "namespace: app\n"}, "app/zeros.bin", 512<<20, 0)
	g.Expect(err).NotTo(HaveOccurred())
	srv := gittest.NewServer(root)
	defer srv.Close()

	cache := t.TempDir()
	f := &gitfetch.Fetcher{CacheDir: cache}
	o := gitfetch.Options{Key: "tenant/bomb", URL: srv.RepoURL("bomb")}
	stop := heapPeak()
	_, err = f.Checkout(context.Background(), o, sha)
	peak := stop()
	limitErr(g, err, "file size", "app/zeros.bin", "512.0 MiB", "16.0 MiB", "--git-max-file-bytes")
	g.Expect(peak).To(BeNumerically("<", 64<<20), "the heap grew by %d MiB", peak>>20)

	var large []string
	g.Expect(filepath.WalkDir(cache, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil && fi.Size() > 1<<20 {
				large = append(large, p)
			}
		}
		return err
	})).To(Succeed())
	g.Expect(large).To(BeEmpty())

	fetches := srv.Fetches()
	_, again := f.Checkout(context.Background(), o, sha)
	g.Expect(again).To(MatchError(err.Error()))
	g.Expect(srv.Fetches()).To(Equal(fetches), "a refused commit is not fetched again")
}

func randomText(g *WithT, n int) string {
	b := make([]byte, n/2)
	_, err := rand.Read(b)
	g.Expect(err).NotTo(HaveOccurred())
	return hex.EncodeToString(b)
}

func TestCheckoutLimits(t *testing.T) {
	deep := strings.Repeat("d/", 40) + "f.yaml"
	long := strings.Repeat(strings.Repeat("n", 99)+"/", 11) + "f.yaml"
	for _, tc := range []struct {
		name   string
		limits gitfetch.Limits
		make   func(g *WithT, r *gittest.Repo) string
		limit  string
		more   []string
	}{{
		name:   "pack size",
		limits: gitfetch.Limits{PackBytes: 4096},
		make: func(g *WithT, r *gittest.Repo) string {
			return commit(g, r, map[string]string{"a.txt": randomText(g, 64<<10)})
		},
		limit: "pack size", more: []string{"--git-max-pack-bytes"},
	}, {
		name:   "objects in the pack",
		limits: gitfetch.Limits{Objects: 10},
		make: func(g *WithT, r *gittest.Repo) string {
			files := map[string]string{}
			for i := range 20 {
				files[string(rune('a'+i))+".txt"] = randomText(g, 16)
			}
			return commit(g, r, files)
		},
		limit: "object count", more: []string{"--git-max-objects"},
	}, {
		name:   "total size of the pack",
		limits: gitfetch.Limits{CommitBytes: 100 << 10},
		make: func(g *WithT, r *gittest.Repo) string {
			return commit(g, r, map[string]string{"a.txt": randomText(g, 60<<10), "b.txt": randomText(g, 60<<10)})
		},
		limit: "total size", more: []string{"--git-max-commit-bytes"},
	}, {
		name:   "files of a checkout, one blob listed many times",
		limits: gitfetch.Limits{Objects: 50},
		make: func(g *WithT, r *gittest.Repo) string {
			h, err := r.WriteBlob("x")
			g.Expect(err).NotTo(HaveOccurred())
			blobs := map[string]plumbing.Hash{}
			for i := range 100 {
				blobs[fmt.Sprintf("f%03d", i)] = h
			}
			sha, err := r.CommitTree("many", blobs)
			g.Expect(err).NotTo(HaveOccurred())
			return sha
		},
		limit: "object count",
	}, {
		name:   "bytes of a checkout, one blob listed many times",
		limits: gitfetch.Limits{CommitBytes: 1 << 20},
		make: func(g *WithT, r *gittest.Repo) string {
			h, err := r.WriteBlob(randomText(g, 100<<10))
			g.Expect(err).NotTo(HaveOccurred())
			blobs := map[string]plumbing.Hash{}
			for i := range 20 {
				blobs[fmt.Sprintf("dir/f%02d", i)] = h
			}
			sha, err := r.CommitTree("many", blobs)
			g.Expect(err).NotTo(HaveOccurred())
			return sha
		},
		limit: "total size", more: []string{"file dir/f1"},
	}, {
		name:  "path depth",
		make:  func(g *WithT, r *gittest.Repo) string { return commit(g, r, map[string]string{deep: "x"}) },
		limit: "path depth", more: []string{"33 directories deep, more than 32", "--git-max-path-depth"},
	}, {
		name:  "path length",
		make:  func(g *WithT, r *gittest.Repo) string { return commit(g, r, map[string]string{long: "x"}) },
		limit: "path length", more: []string{"1099 bytes long, more than 1024", "--git-max-path-length"},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			root := t.TempDir()
			r := newRepo(t, g, root, "repo")
			sha := tc.make(g, r)
			srv := gittest.NewServer(root)
			defer srv.Close()
			f := &gitfetch.Fetcher{CacheDir: t.TempDir(), Limits: tc.limits}
			_, err := f.Checkout(context.Background(), gitfetch.Options{Key: "ns/repo", URL: srv.RepoURL("repo")}, sha)
			limitErr(g, err, tc.limit, tc.more...)

			// Within the defaults, the same commit checks out.
			f = &gitfetch.Fetcher{CacheDir: t.TempDir()}
			if tc.limits == (gitfetch.Limits{}) {
				return
			}
			dir, err := f.Checkout(context.Background(), gitfetch.Options{Key: "ns/repo", URL: srv.RepoURL("repo")}, sha)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(dir).To(BeADirectory())
		})
	}
}

// A fetch stops when its context is done, even while the pack streams.
func TestCheckoutStopsOnCancel(t *testing.T) {
	g := NewWithT(t)
	root := t.TempDir()
	r := newRepo(t, g, root, "repo")
	sha := commit(g, r, map[string]string{"a.txt": "a"})
	srv := gittest.NewServer(root)
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	f := &gitfetch.Fetcher{CacheDir: t.TempDir()}
	_, err := f.Checkout(ctx, gitfetch.Options{Key: "ns/repo", URL: srv.RepoURL("repo")}, sha)
	g.Expect(err).To(MatchError(context.Canceled))
}
