package devenv

import (
	"io/fs"
	"os"
	"path/filepath"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// CommitTree copies src into a new git repository at dst (branch main) and
// commits it.
func CommitTree(src, dst string) error {
	if err := os.RemoveAll(dst); err != nil {
		return err
	}
	repo, err := git.PlainInitWithOptions(dst, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName("main")},
	})
	if err != nil {
		return err
	}
	err = filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(src, path)
		if err != nil {
			return err
		}
		b, err := os.ReadFile(path) //nolint:gosec // G304: a file under src, the directory the caller passed.
		if err != nil {
			return err
		}
		target := filepath.Join(dst, rel)
		if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
			return err
		}
		return os.WriteFile(target, b, 0o600) //nolint:gosec // G703: target is dst joined with a path WalkDir found under src.
	})
	if err != nil {
		return err
	}
	wt, err := repo.Worktree()
	if err != nil {
		return err
	}
	if err := wt.AddGlob("."); err != nil {
		return err
	}
	_, err = wt.Commit("Examples", &git.CommitOptions{All: true, Author: &object.Signature{Name: "fleet demo", Email: "demo@localhost", When: time.Now()}})
	return err
}
