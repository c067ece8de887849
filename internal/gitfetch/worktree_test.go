package gitfetch

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	. "github.com/onsi/gomega"
)

// store writes one object into repo and returns its hash.
func store(g *WithT, repo *git.Repository, o interface {
	Encode(plumbing.EncodedObject) error
}) plumbing.Hash {
	obj := repo.Storer.NewEncodedObject()
	g.Expect(o.Encode(obj)).To(Succeed())
	h, err := repo.Storer.SetEncodedObject(obj)
	g.Expect(err).NotTo(HaveOccurred())
	return h
}

func blob(g *WithT, repo *git.Repository, content string) plumbing.Hash {
	obj := repo.Storer.NewEncodedObject()
	obj.SetType(plumbing.BlobObject)
	w, err := obj.Writer()
	g.Expect(err).NotTo(HaveOccurred())
	_, err = w.Write([]byte(content))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w.Close()).To(Succeed())
	h, err := repo.Storer.SetEncodedObject(obj)
	g.Expect(err).NotTo(HaveOccurred())
	return h
}

// A hostile repository lists one name twice in a tree, first as a symlink
// to a directory outside the checkout (another tenant's cache), then as a
// directory holding a file: written in order, the file would land through
// the symlink outside the checkout. The tree is refused before anything is
// written, and nothing appears outside.
func TestCheckoutRefusesATreeThatWritesThroughASymlink(t *testing.T) {
	g := NewWithT(t)
	base := t.TempDir()
	victim := filepath.Join(base, "victim")
	g.Expect(os.MkdirAll(victim, 0o755)).To(Succeed())
	repo, err := git.PlainInit(filepath.Join(base, "repo"), true)
	g.Expect(err).NotTo(HaveOccurred())

	link := blob(g, repo, victim)
	payload := blob(g, repo, "written by the attacker\n")
	sub := store(g, repo, &object.Tree{Entries: []object.TreeEntry{{Name: "planted", Mode: filemode.Regular, Hash: payload}}})
	root := store(g, repo, &object.Tree{Entries: []object.TreeEntry{
		{Name: "a", Mode: filemode.Symlink, Hash: link},
		{Name: "a", Mode: filemode.Dir, Hash: sub},
	}})
	sig := object.Signature{Name: "attacker", Email: "a@example.com", When: time.Unix(0, 0)}
	commit := store(g, repo, &object.Commit{Author: sig, Committer: sig, Message: "escape", TreeHash: root})

	checkout := filepath.Join(base, "checkout")
	err = writeTree(context.Background(), repo, commit, checkout, Limits{}.withDefaults(), Base{})
	g.Expect(err).To(MatchError(ContainSubstring(`lists "a" twice`)))
	g.Expect(filepath.Join(victim, "planted")).NotTo(BeAnExistingFile())
	g.Expect(checkout).NotTo(BeADirectory(), "nothing is written from a refused tree")
}

// entry is a tree entry of a test commit: its mode and content (a
// symlink's target).
type entry struct {
	mode    filemode.FileMode
	content string
}

// commitOf stores a commit whose tree holds files (slash paths) and
// returns its hash.
func commitOf(g *WithT, repo *git.Repository, files map[string]entry) plumbing.Hash {
	var dir func(prefix string) plumbing.Hash
	dir = func(prefix string) plumbing.Hash {
		t := &object.Tree{}
		subdirs := map[string]bool{}
		for p, e := range files {
			rel, ok := strings.CutPrefix(p, prefix)
			if !ok {
				continue
			}
			if first, _, nested := strings.Cut(rel, "/"); nested {
				subdirs[first] = true
				continue
			}
			h := plumbing.ZeroHash
			if e.mode != filemode.Submodule {
				h = blob(g, repo, e.content)
			}
			t.Entries = append(t.Entries, object.TreeEntry{Name: rel, Mode: e.mode, Hash: h})
		}
		for name := range subdirs {
			t.Entries = append(t.Entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: dir(prefix + name + "/")})
		}
		sort.Sort(object.TreeEntrySorter(t.Entries))
		return store(g, repo, t)
	}
	sig := object.Signature{Name: "test", Email: "t@example.com", When: time.Unix(0, 0)}
	return store(g, repo, &object.Commit{Author: sig, Committer: sig, Message: "test", TreeHash: dir("")})
}

// snapshot lists what dir holds: each path with its kind, permissions and
// content (a symlink's target).
func snapshot(g *WithT, dir string) map[string]string {
	out := map[string]string{}
	g.Expect(filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := os.Lstat(p)
		if err != nil {
			return err
		}
		switch {
		case info.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			out[rel] = "link " + target
			return err
		case info.IsDir():
			out[rel] = "dir"
		default:
			content, err := os.ReadFile(p)
			out[rel] = fmt.Sprintf("file %v %s", info.Mode().Perm(), content)
			return err
		}
		return nil
	})).To(Succeed())
	return out
}

// A commit written over the checkout of the one before holds exactly what
// a fresh checkout of it holds, whatever changed between them (content,
// mode, a file becoming a symlink or a directory and back, directories
// gone or emptied), and the files that did not change are not written
// again.
func TestCheckoutOverAnEarlierOneHoldsExactlyTheNewCommit(t *testing.T) {
	g := NewWithT(t)
	base := t.TempDir()
	repo, err := git.PlainInit(filepath.Join(base, "repo"), true)
	g.Expect(err).NotTo(HaveOccurred())
	reg := func(c string) entry { return entry{filemode.Regular, c} }
	steps := []map[string]entry{{
		"fleet.yaml":        reg("a"),
		"apps/one/cm.yaml":  reg("1"),
		"apps/two/cm.yaml":  reg("2"),
		"apps/two/run.sh":   reg("#!/bin/sh"),
		"deep/a/b/c/d.yaml": reg("d"),
		"link":              {filemode.Symlink, "apps/one"},
		"vendor/mod":        {filemode.Submodule, ""},
	}, {
		"fleet.yaml":        reg("a"),                               // unchanged
		"apps/one/cm.yaml":  reg("1 changed"),                       // content
		"apps/two/run.sh":   {filemode.Executable, "#!/bin/sh"},     // mode
		"apps/two/new.yaml": reg("new"),                             // added; cm.yaml removed
		"deep":              reg("a file where a directory was"),    // directory to file
		"link/inside.yaml":  reg("a directory where a symlink was"), // symlink to directory
		"apps/three/x.yaml": {filemode.Symlink, "../../fleet.yaml"}, // new directory holding a symlink
	}, {
		"fleet.yaml":       reg("a"),
		"deep/again.yaml":  reg("a directory where a file was"),
		"link":             reg("a file where a directory was"),
		"apps/one/cm.yaml": reg("1 changed"),
	}, {
		"fleet.yaml": reg("only this"),
	}}
	limits := Limits{}.withDefaults()
	var prev plumbing.Hash
	prevDir := ""
	for i, files := range steps {
		commit := commitOf(g, repo, files)
		fresh := filepath.Join(base, fmt.Sprintf("fresh-%d", i))
		g.Expect(writeTree(context.Background(), repo, commit, fresh, limits, Base{})).To(Succeed())
		over := filepath.Join(base, fmt.Sprintf("over-%d", i))
		// The base's fleet.yaml is marked with a modification time no
		// write leaves: a file written again (removed and created, or
		// written in place) loses it. Its inode would not do: a file
		// removed and created again may be given the inode just freed.
		marked := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
		if prevDir != "" {
			g.Expect(os.Chtimes(filepath.Join(prevDir, "fleet.yaml"), marked, marked)).To(Succeed())
		}
		g.Expect(writeTree(context.Background(), repo, commit, over, limits, Base{Dir: prevDir, Commit: prev.String()})).To(Succeed())
		g.Expect(snapshot(g, over)).To(Equal(snapshot(g, fresh)), "step %d", i)
		if prevDir != "" {
			g.Expect(prevDir).NotTo(BeADirectory(), "step %d: the base became the checkout", i)
			now, err := os.Lstat(filepath.Join(over, "fleet.yaml"))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(now.ModTime().Equal(marked)).To(Equal(steps[i-1]["fleet.yaml"] == files["fleet.yaml"]),
				"step %d: a file that did not change is not written again; one that did is (modified %s)", i, now.ModTime())
		}
		prev, prevDir = commit, over
	}
}

// A base that is not what it claims (its commit unknown to the object
// store) is not used: the checkout is written afresh and the base deleted.
func TestCheckoutOverAnUnknownBaseWritesAfresh(t *testing.T) {
	g := NewWithT(t)
	base := t.TempDir()
	repo, err := git.PlainInit(filepath.Join(base, "repo"), true)
	g.Expect(err).NotTo(HaveOccurred())
	commit := commitOf(g, repo, map[string]entry{"fleet.yaml": {filemode.Regular, "a"}})
	stale := filepath.Join(base, "stale")
	g.Expect(os.MkdirAll(stale, 0o750)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(stale, "left-behind"), []byte("x"), 0o600)).To(Succeed())
	dir := filepath.Join(base, "checkout")
	g.Expect(writeTree(context.Background(), repo, commit, dir, Limits{}.withDefaults(),
		Base{Dir: stale, Commit: strings.Repeat("ab", 20)})).To(Succeed())
	fresh := filepath.Join(base, "fresh")
	g.Expect(writeTree(context.Background(), repo, commit, fresh, Limits{}.withDefaults(), Base{})).To(Succeed())
	g.Expect(snapshot(g, dir)).To(Equal(snapshot(g, fresh)))
	g.Expect(snapshot(g, dir)).To(HaveKey("fleet.yaml"))
	g.Expect(snapshot(g, dir)).NotTo(HaveKey("left-behind"))
}

// A base changed under the cache (a file of it deleted, emptied or made
// executable by a cleaner or by hand) is not carried into the next commit:
// it is written afresh.
func TestCheckoutOverADamagedBaseWritesAfresh(t *testing.T) {
	for name, damage := range map[string]func(p string) error{
		"deleted":    os.Remove,
		"emptied":    func(p string) error { return os.Truncate(p, 0) },
		"executable": func(p string) error { return os.Chmod(p, 0o755) },
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			base := t.TempDir()
			repo, err := git.PlainInit(filepath.Join(base, "repo"), true)
			g.Expect(err).NotTo(HaveOccurred())
			limits := Limits{}.withDefaults()
			first := commitOf(g, repo, map[string]entry{"kept/fleet.yaml": {filemode.Regular, "kept"}, "changed.yaml": {filemode.Regular, "1"}})
			second := commitOf(g, repo, map[string]entry{"kept/fleet.yaml": {filemode.Regular, "kept"}, "changed.yaml": {filemode.Regular, "2"}})
			earlier := filepath.Join(base, "earlier")
			g.Expect(writeTree(context.Background(), repo, first, earlier, limits, Base{})).To(Succeed())
			g.Expect(damage(filepath.Join(earlier, "kept", "fleet.yaml"))).To(Succeed())

			dir := filepath.Join(base, "checkout")
			g.Expect(writeTree(context.Background(), repo, second, dir, limits, Base{Dir: earlier, Commit: first.String()})).To(Succeed())
			fresh := filepath.Join(base, "fresh")
			g.Expect(writeTree(context.Background(), repo, second, fresh, limits, Base{})).To(Succeed())
			g.Expect(snapshot(g, dir)).To(Equal(snapshot(g, fresh)))
		})
	}
}
