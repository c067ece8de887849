package gitfetch

import (
	"context"
	"os"
	"path/filepath"
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
	err = writeTree(context.Background(), repo, commit, checkout, Limits{}.withDefaults())
	g.Expect(err).To(MatchError(ContainSubstring(`lists "a" twice`)))
	g.Expect(filepath.Join(victim, "planted")).NotTo(BeAnExistingFile())
	g.Expect(checkout).NotTo(BeADirectory(), "nothing is written from a refused tree")
}
