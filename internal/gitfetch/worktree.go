package gitfetch

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
)

// Base is an earlier checkout a new one may be written over, so that a
// commit costs the files it changed rather than every file of the
// repository: Dir holds exactly the files of Commit as Checkout wrote them,
// and nothing reads or writes it any more. Checkout takes it over: it
// becomes the new checkout, or is deleted.
type Base struct {
	Dir    string
	Commit string
}

// writeTree writes the files of commit into dir, which it creates afresh,
// or makes from base's directory. Either way dir holds the commit's files
// and nothing else: no file a commit removed, no directory left empty.
// Submodules are left out. The whole tree is checked against the limits
// before the first file is written, from the sizes in the objects' headers;
// each file is then copied as it inflates. A missing object means the cache
// is incomplete (errIncomplete).
func writeTree(ctx context.Context, repo *git.Repository, commit plumbing.Hash, dir string, limits Limits, base Base) error {
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
	pl := &planner{repo: repo, limits: limits}
	if err := pl.walk(ctx, tree, "", 0); err != nil {
		return missing(err)
	}
	if base.Dir != "" && writeOver(ctx, repo, pl.files, base, dir, limits) {
		return nil
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	// Each directory is made once, not asked for again at each of its
	// files: a checkout is a few system calls per file.
	made := map[string]bool{dir: true}
	for _, f := range pl.files {
		if err := writeFile(ctx, repo, f, dir, made); err != nil {
			_ = os.RemoveAll(dir)
			return missing(err)
		}
	}
	return nil
}

// writeOver makes dir from base's directory, holding the files of the
// earlier commit: it moves it to dir, deletes what the new commit does not
// have (files, and directories none of its files are in), and writes the
// files that are new or changed (content or mode); the others stay as they
// are. It reports whether dir holds the new commit's files; when it does
// not, dir is gone and the caller writes it afresh.
func writeOver(ctx context.Context, repo *git.Repository, files []treeFile, base Base, dir string, limits Limits) bool {
	if !isFullSHA(base.Commit) {
		return false
	}
	prev, err := repo.CommitObject(plumbing.NewHash(base.Commit))
	if err != nil {
		return false
	}
	prevTree, err := prev.Tree()
	if err != nil {
		return false
	}
	old := &planner{repo: repo, limits: limits}
	if err := old.walk(ctx, prevTree, "", 0); err != nil {
		return false
	}
	if err := os.Rename(base.Dir, dir); err != nil {
		return false
	}
	if err := updateTree(ctx, repo, old.files, files, dir); err != nil {
		_ = os.RemoveAll(dir)
		return false
	}
	return true
}

// updateTree turns dir, holding the files was, into one holding the files
// want. The files it keeps are checked first (their kind, size and
// executable bit): a tree changed under the cache, by a cleaner of
// temporary directories say, is not carried into the next commit, it is
// written afresh.
func updateTree(ctx context.Context, repo *git.Repository, was, want []treeFile, dir string) error {
	wantDirs, wasDirs := parents(want), parents(was)
	gone := make(map[string]treeFile, len(was))
	for _, f := range was {
		gone[f.path] = f
	}
	var write []treeFile
	for _, f := range want {
		if k, ok := gone[f.path]; ok && k.hash == f.hash && k.mode == f.mode {
			if err := intact(filepath.Join(dir, filepath.FromSlash(f.path)), f); err != nil {
				return err
			}
			delete(gone, f.path)
			continue
		}
		write = append(write, f)
	}
	// Directories first: a directory the new commit has no file in goes
	// whole (a file of the same name may take its place).
	for d := range wasDirs {
		if !wantDirs[d] {
			if err := os.RemoveAll(filepath.Join(dir, filepath.FromSlash(d))); err != nil {
				return err
			}
		}
	}
	// Then the files that changed or went; os.Remove takes a symlink
	// itself, never what it points to.
	for _, f := range gone {
		if err := os.Remove(filepath.Join(dir, filepath.FromSlash(f.path))); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	made := map[string]bool{dir: true}
	for d := range wantDirs {
		if wasDirs[d] {
			made[filepath.Join(dir, filepath.FromSlash(d))] = true
		}
	}
	for _, f := range write {
		if err := writeFile(ctx, repo, f, dir, made); err != nil {
			return err
		}
	}
	return nil
}

// intact says whether the file at p is still f as writeFile wrote it: a
// symlink or a regular file, of f's size, executable when f is.
func intact(p string, f treeFile) error {
	info, err := os.Lstat(p)
	if err != nil {
		return err
	}
	symlink := info.Mode()&fs.ModeSymlink != 0
	switch {
	case symlink != (f.mode == filemode.Symlink), !symlink && !info.Mode().IsRegular():
		return fmt.Errorf("%s is no longer the file that was written", f.path)
	case info.Size() != f.size:
		return fmt.Errorf("%s is no longer the size it was written", f.path)
	case !symlink && (info.Mode().Perm()&0o100 != 0) != (f.mode == filemode.Executable):
		return fmt.Errorf("%s is no longer of the mode it was written", f.path)
	}
	return nil
}

// parents are the directories files are in, every level of them, but the
// root.
func parents(files []treeFile) map[string]bool {
	dirs := map[string]bool{}
	for _, f := range files {
		for d := path.Dir(f.path); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
		}
	}
	return dirs
}

// treeFile is a file of a commit to write.
type treeFile struct {
	path string
	mode filemode.FileMode
	hash plumbing.Hash
	size int64
}

// planner lists the files of a tree, counting entries (a directory listed
// twice counts twice, as it would be written twice), bytes, path depth and
// length against the limits as it goes.
type planner struct {
	repo    *git.Repository
	limits  Limits
	entries int64
	total   int64
	files   []treeFile
}

func (p *planner) walk(ctx context.Context, t *object.Tree, dir string, depth int) error {
	// A name listed twice in one tree could be a symlink and then a
	// directory, whose files would be written through the symlink, outside
	// the checkout: git refuses such trees, and so does this.
	seen := make(map[string]struct{}, len(t.Entries))
	for _, e := range t.Entries {
		if err := ctx.Err(); err != nil {
			return err
		}
		if e.Name == "" || e.Name == "." || e.Name == ".." || strings.ContainsAny(e.Name, "/\\\x00") {
			return fmt.Errorf("the commit has an entry with an invalid name %q in %q", clip(e.Name), clip(dir))
		}
		if _, dup := seen[e.Name]; dup {
			return fmt.Errorf("the commit lists %q twice in one directory: git refuses such a tree", clip(path.Join(dir, e.Name)))
		}
		seen[e.Name] = struct{}{}
		name := path.Join(dir, e.Name)
		if err := p.check(name); err != nil {
			return err
		}
		switch e.Mode {
		case filemode.Submodule:
			continue
		case filemode.Dir:
			if depth+1 > p.limits.PathDepth {
				return overLimit(limitPathDepth, int64(p.limits.PathDepth), int64(depth+1), clip(name))
			}
			sub, err := p.repo.TreeObject(e.Hash)
			if err != nil {
				return err
			}
			if err := p.walk(ctx, sub, name, depth+1); err != nil {
				return err
			}
		default:
			if err := p.add(name, e); err != nil {
				return err
			}
		}
	}
	return nil
}

// check counts one entry and checks its path.
func (p *planner) check(name string) error {
	p.entries++
	if p.entries > p.limits.Objects {
		return overLimit(limitObjects, p.limits.Objects, p.entries, "")
	}
	if !filepath.IsLocal(filepath.FromSlash(name)) {
		return fmt.Errorf("the commit has a file outside the repository: %q", clip(name))
	}
	if len(name) > p.limits.PathLength {
		return overLimit(limitPathLength, int64(p.limits.PathLength), int64(len(name)), clip(name))
	}
	return nil
}

func (p *planner) add(name string, e object.TreeEntry) error {
	size, err := objectSize(p.repo, e.Hash)
	if err != nil {
		return err
	}
	if size > p.limits.FileBytes {
		return overLimit(limitFileBytes, p.limits.FileBytes, size, name)
	}
	p.total += size
	if p.total > p.limits.CommitBytes {
		return overLimit(limitCommitBytes, p.limits.CommitBytes, p.total, name)
	}
	p.files = append(p.files, treeFile{path: name, mode: e.Mode, hash: e.Hash, size: size})
	return nil
}

// objectSize reads an object's size from its header, without inflating it.
func objectSize(repo *git.Repository, h plumbing.Hash) (int64, error) {
	if s, ok := repo.Storer.(interface {
		EncodedObjectSize(plumbing.Hash) (int64, error)
	}); ok {
		return s.EncodedObjectSize(h)
	}
	o, err := repo.Storer.EncodedObject(plumbing.AnyObject, h)
	if err != nil {
		return 0, err
	}
	return o.Size(), nil
}

// clip shortens a path for a message.
func clip(name string) string {
	if len(name) > 200 {
		return name[:200] + "..."
	}
	return name
}

// writeFile copies one file as it inflates, stopping at its declared size,
// making its directory unless made says it is there.
func writeFile(ctx context.Context, repo *git.Repository, f treeFile, dir string, made map[string]bool) error {
	blob, err := repo.BlobObject(f.hash)
	if err != nil {
		return err
	}
	r, err := blob.Reader()
	if err != nil {
		return err
	}
	defer r.Close()
	p := filepath.Join(dir, filepath.FromSlash(f.path))
	if parent := filepath.Dir(p); !made[parent] {
		if err := os.MkdirAll(parent, 0o750); err != nil {
			return err
		}
		made[parent] = true
	}
	if f.mode == filemode.Symlink {
		target, err := io.ReadAll(io.LimitReader(r, f.size))
		if err != nil {
			return err
		}
		return os.Symlink(string(target), p)
	}
	mode := os.FileMode(0o644)
	if f.mode == filemode.Executable {
		mode = 0o755
	}
	// The directory is new: a file that exists already, or a symlink in
	// its place, is refused rather than followed.
	out, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, mode) //nolint:gosec // G304: p is a file of the commit in the new checkout, local by planner.check; O_EXCL|O_NOFOLLOW refuse what is there
	if err != nil {
		return err
	}
	n, err := io.Copy(out, &ctxReader{ctx: ctx, r: io.LimitReader(r, f.size+1)})
	if err == nil && n != f.size {
		err = fmt.Errorf("object %s of %s inflates to %d bytes, not the %d its header says", f.hash, f.path, n, f.size)
	}
	if err != nil {
		_ = out.Close() // the copy failed: its error is the one to report
		return err
	}
	return out.Close()
}

// ctxReader stops reading once ctx is done.
type ctxReader struct {
	ctx context.Context //nolint:containedctx // an io.Reader: Read takes no context
	r   io.Reader
}

func (c *ctxReader) Read(b []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.r.Read(b)
}

func missing(err error) error {
	if errors.Is(err, plumbing.ErrObjectNotFound) {
		return errIncomplete
	}
	return err
}
