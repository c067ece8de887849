package preview

import (
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

// Checkout writes the tree of revision (a branch, tag, commit or
// expression git rev-parse reads, such as HEAD~1) of the repository at repo
// into dir, and returns the commit's hash.
func Checkout(repo, revision, dir string) (string, error) {
	r, err := git.PlainOpenWithOptions(repo, &git.PlainOpenOptions{DetectDotGit: true})
	if err != nil {
		return "", fmt.Errorf("%s: not a git repository: %w", repo, err)
	}
	h, err := r.ResolveRevision(plumbing.Revision(revision))
	if err != nil {
		return "", fmt.Errorf("%s: revision %q does not exist: %w", repo, revision, err)
	}
	c, err := r.CommitObject(*h)
	if err != nil {
		return "", fmt.Errorf("%s: revision %q: %w", repo, revision, err)
	}
	tree, err := c.Tree()
	if err != nil {
		return "", err
	}
	err = tree.Files().ForEach(func(f *object.File) error {
		if !filepath.IsLocal(filepath.FromSlash(f.Name)) {
			return fmt.Errorf("%s: a path outside the tree", f.Name)
		}
		dst := filepath.Join(dir, filepath.FromSlash(f.Name))
		if err := os.MkdirAll(filepath.Dir(dst), 0o750); err != nil {
			return err
		}
		if f.Mode == filemode.Symlink || f.Mode == filemode.Submodule {
			return nil
		}
		rd, err := f.Reader()
		if err != nil {
			return err
		}
		defer func() { _ = rd.Close() }()
		out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600) //nolint:gosec // G304: below the temporary directory
		if err != nil {
			return err
		}
		_, err = io.Copy(out, rd)
		return errors.Join(err, out.Close())
	})
	if err != nil {
		return "", fmt.Errorf("%s: checking out %q: %w", repo, revision, err)
	}
	return h.String(), nil
}
