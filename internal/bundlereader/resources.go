package bundlereader

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	// Aliased: the package's tests have a helper named content.
	wire "github.com/gitfleet/fleet/internal/content"
)

const (
	// EncodingBase64Gz is the encoding of resources stored gzipped, then
	// base64 encoded (content.EncodingBase64Gz).
	EncodingBase64Gz = wire.EncodingBase64Gz
	// compressAbove is the size above which text files are compressed too, to
	// keep Bundles small.
	compressAbove = wire.CompressAbove
)

// fileSet holds a bundle's files by name.
type fileSet map[string][]byte

func (fs fileSet) size() int {
	n := 0
	for _, d := range fs {
		n += len(d)
	}
	return n
}

// resources encodes the files, sorted by name.
func (fs fileSet) resources() ([]fleet.BundleResource, error) {
	names := make([]string, 0, len(fs))
	for n := range fs {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]fleet.BundleResource, 0, len(names))
	for _, n := range names {
		r, err := EncodeResource(n, fs[n])
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}

// EncodeResource makes the resource of one file (content.EncodeResource:
// the agent decodes what the manager encodes with one helper).
func EncodeResource(name string, data []byte) (fleet.BundleResource, error) {
	return wire.EncodeResource(name, data)
}

// DecodeResource returns the bytes of a resource's file
// (content.DecodeResource).
func DecodeResource(r fleet.BundleResource) ([]byte, error) {
	return wire.DecodeResource(r)
}

// collectFiles reads the files of the bundle directory rel as Fleet does
// (its bundlereader's GetContent): everything below it except hidden files
// and directories (.git, .fleetignore, .helmignore ...), the config files at
// its top (see configFiles) and what .fleetignore files leave out. A
// sub-directory with a fleet.yaml of its own is a bundle too, and its files,
// that fleet.yaml included, are also files of this bundle, as Fleet ships
// them; the agent deploys none of them as this bundle's manifests
// (agent/deployer.PlainManifests), as Fleet's agent does not. A chart's
// .helmignore leaves nothing out: Fleet ships every file of the chart, and
// Helm, loading a chart from its files rather than from a directory, does
// not read it. Symlinks to files inside the root are followed; symlinked
// directories are not; a symlink out of the root is an error unless
// .fleetignore leaves it out. Once the files are larger than the limit they
// are only counted, not read, and total tells by how much.
func (r *reader) collectFiles(ctx context.Context, rel string, config map[string]bool) (files fileSet, total int, err error) {
	w := &walker{reader: r, bundleAbs: r.abs(rel), bundleRel: rel, files: fileSet{}, config: config}
	if err := w.walk(ctx, "", nil); err != nil {
		return nil, 0, err
	}
	return w.files, w.total, nil
}

type walker struct {
	*reader
	bundleAbs, bundleRel string
	files                fileSet
	total                int
	config               map[string]bool
}

// walk reads the directory sub (relative to the bundle, "" for its root)
// with the .fleetignore rules of its parents.
func (w *walker) walk(ctx context.Context, sub string, rules ignoreRules) error {
	r, bundleAbs, bundleRel := w.reader, w.bundleAbs, w.bundleRel
	if err := ctx.Err(); err != nil {
		return err
	}
	dir := filepath.Join(bundleAbs, filepath.FromSlash(sub))
	if _, err := os.Lstat(filepath.Join(dir, ignoreFile)); err == nil {
		data, err := r.readFile(dir, ignoreFile)
		if err != nil {
			return err
		}
		rules = append(append(ignoreRules(nil), rules...), parseIgnore(data, sub)...)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range entries {
		name := e.Name()
		rel := path.Join(sub, name)
		if strings.HasPrefix(name, ".") || w.config[rel] {
			continue
		}
		full := filepath.Join(dir, name)
		target, isSymlink := full, e.Type()&fs.ModeSymlink != 0
		if isSymlink {
			resolved, err := filepath.EvalSymlinks(full)
			switch {
			case err != nil && errors.Is(err, fs.ErrNotExist):
				if rules.ignored(rel, false) {
					continue
				}
				return invalidf("symlink %s is broken", path.Join(bundleRel, rel))
			case err != nil:
				return err
			}
			if _, inside := r.rel(resolved); !inside {
				if rules.ignored(rel, false) {
					continue
				}
				return invalidf("symlink %s points outside the repository root; only links within it are allowed", path.Join(bundleRel, rel))
			}
			target = resolved
		}
		st, err := os.Stat(target)
		if err != nil {
			return err
		}
		isDir := st.IsDir()
		if rules.ignored(rel, isDir) {
			continue
		}
		if isDir {
			if isSymlink {
				continue // not followed: it could loop, and its files are read where they are
			}
			if err := w.walk(ctx, rel, rules); err != nil {
				return err
			}
			continue
		}
		if !st.Mode().IsRegular() {
			continue // sockets, devices, pipes
		}
		w.total += int(st.Size())
		if limit := r.o.MaxResourceBytes; limit > 0 && w.total > limit {
			continue // too large anyway: count, do not read
		}
		data, err := os.ReadFile(target) //nolint:gosec // G304: target is inside the repository root, symlinks resolved and checked above
		if err != nil {
			return err
		}
		w.files[rel] = data
	}
	return nil
}
