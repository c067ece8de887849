package gitfetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// writeTree writes the files of commit into dir, which it creates afresh.
// Writing a fresh directory, rather than checking out over the previous
// commit, leaves nothing behind from it: no removed file, no empty directory.
// Submodules are left out. A missing object means the cache is incomplete
// (errIncomplete).
func writeTree(ctx context.Context, repo *git.Repository, commit plumbing.Hash, dir string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	c, err := repo.CommitObject(commit)
	if err != nil {
		return missing(err)
	}
	tree, err := c.Tree()
	if err != nil {
		return missing(err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	err = tree.Files().ForEach(func(f *object.File) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		if !filepath.IsLocal(f.Name) {
			return fmt.Errorf("commit %s has a file outside the repository: %q", commit, f.Name)
		}
		p := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		switch f.Mode {
		case filemode.Symlink:
			target, err := f.Contents()
			if err != nil {
				return missing(err)
			}
			return os.Symlink(target, p)
		case filemode.Executable:
			return writeBlob(f, p, 0o755)
		default:
			return writeBlob(f, p, 0o644)
		}
	})
	if err != nil {
		_ = os.RemoveAll(dir)
		return missing(err)
	}
	return nil
}

func writeBlob(f *object.File, path string, mode os.FileMode) error {
	r, err := f.Reader()
	if err != nil {
		return missing(err)
	}
	defer r.Close()
	out, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return missing(err)
	}
	return out.Close()
}

func missing(err error) error {
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return errIncomplete
	}
	return err
}
