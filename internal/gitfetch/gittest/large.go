package gittest

import (
	"errors"
	"io"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/filemode"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/storer"
)

// CommitLarge commits on the current branch a tree made only of files (path:
// content) and of the file large holding size bytes of fill, written to the
// object store as it is compressed: neither memory nor the worktree ever
// holds it. The worktree is left as it was. It returns the commit sha.
func (r *Repo) CommitLarge(msg string, files map[string]string, large string, size int64, fill byte) (string, error) {
	blobs := map[string]plumbing.Hash{}
	for name, content := range files {
		h, err := r.writeBlob(int64(len(content)), strings.NewReader(content))
		if err != nil {
			return "", err
		}
		blobs[name] = h
	}
	h, err := r.writeBlob(size, io.LimitReader(repeatReader(fill), size))
	if err != nil {
		return "", err
	}
	blobs[large] = h
	return r.commitTree(msg, blobs)
}

// CommitTree commits on the current branch a tree whose files are the given
// blobs (path: blob sha), which may repeat: a tree that lists one small blob
// many times, or one directory in many places, is small in git and large on
// disk. It returns the commit sha.
func (r *Repo) CommitTree(msg string, blobs map[string]plumbing.Hash) (string, error) {
	return r.commitTree(msg, blobs)
}

// WriteBlob stores content as a blob and returns its sha.
func (r *Repo) WriteBlob(content string) (plumbing.Hash, error) {
	return r.writeBlob(int64(len(content)), strings.NewReader(content))
}

func (r *Repo) writeBlob(size int64, content io.Reader) (plumbing.Hash, error) {
	lw, ok := r.repo.Storer.(interface {
		LazyWriter() (io.WriteCloser, func(plumbing.ObjectType, int64) error, error)
	})
	if !ok {
		return plumbing.ZeroHash, errors.New("the object store cannot write objects as they stream")
	}
	w, header, err := lw.LazyWriter()
	if err != nil {
		return plumbing.ZeroHash, err
	}
	if err := header(plumbing.BlobObject, size); err != nil {
		_ = w.Close() // the header's error is the one to report
		return plumbing.ZeroHash, err
	}
	if _, err := io.Copy(w, content); err != nil {
		_ = w.Close() // the copy's error is the one to report
		return plumbing.ZeroHash, err
	}
	if err := w.Close(); err != nil {
		return plumbing.ZeroHash, err
	}
	return w.(interface{ Hash() plumbing.Hash }).Hash(), nil
}

// commitTree writes the directories of blobs and a commit of them on top of
// HEAD, and moves the current branch to it.
func (r *Repo) commitTree(msg string, blobs map[string]plumbing.Hash) (string, error) {
	root, err := writeDir(r.repo.Storer, "", blobs)
	if err != nil {
		return "", err
	}
	head, err := r.repo.Head()
	var parents []plumbing.Hash
	if err == nil {
		parents = []plumbing.Hash{head.Hash()}
	}
	sig := object.Signature{Name: "test", Email: "test@example.com", When: time.Now()}
	c := &object.Commit{Author: sig, Committer: sig, Message: msg, TreeHash: root, ParentHashes: parents}
	h, err := store(r.repo.Storer, c)
	if err != nil {
		return "", err
	}
	branch, err := r.repo.Storer.Reference(plumbing.HEAD)
	if err != nil {
		return "", err
	}
	if err := r.repo.Storer.SetReference(plumbing.NewHashReference(branch.Target(), h)); err != nil {
		return "", err
	}
	return h.String(), nil
}

// writeDir writes the directory dir of blobs (and those below it).
func writeDir(s storer.EncodedObjectStorer, dir string, blobs map[string]plumbing.Hash) (plumbing.Hash, error) {
	files := map[string]plumbing.Hash{}
	subdirs := map[string]bool{}
	for p, h := range blobs {
		rel := p
		if dir != "" {
			var ok bool
			if rel, ok = strings.CutPrefix(p, dir+"/"); !ok {
				continue
			}
		}
		if first, _, nested := strings.Cut(rel, "/"); nested {
			subdirs[first] = true
		} else {
			files[rel] = h
		}
	}
	t := &object.Tree{}
	for name, h := range files {
		t.Entries = append(t.Entries, object.TreeEntry{Name: name, Mode: filemode.Regular, Hash: h})
	}
	for name := range subdirs {
		h, err := writeDir(s, path.Join(dir, name), blobs)
		if err != nil {
			return plumbing.ZeroHash, err
		}
		t.Entries = append(t.Entries, object.TreeEntry{Name: name, Mode: filemode.Dir, Hash: h})
	}
	sort.Sort(object.TreeEntrySorter(t.Entries))
	return store(s, t)
}

func store(s storer.EncodedObjectStorer, o interface {
	Encode(plumbing.EncodedObject) error
}) (plumbing.Hash, error) {
	eo := s.NewEncodedObject()
	if err := o.Encode(eo); err != nil {
		return plumbing.ZeroHash, err
	}
	return s.SetEncodedObject(eo)
}

// repeatReader reads the same byte for ever.
type repeatReader byte

func (b repeatReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = byte(b)
	}
	return len(p), nil
}
