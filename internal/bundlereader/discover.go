package bundlereader

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// expandPaths turns the paths of a GitRepo or of `fleet apply` into the
// directories to search, as Fleet does: leading slashes are dropped ("/"
// is the root), a glob ("charts/*") stands for every directory it matches,
// and a path that matches no directory adds nothing. Paths that leave the
// root, directly or through a symlink, are errors.
func (r *reader) expandPaths(paths []string) ([]string, error) {
	if len(paths) == 0 {
		paths = []string{"."}
	}
	var out []string
	for _, p := range paths {
		clean := path.Clean(filepath.ToSlash(strings.TrimLeft(p, "/")))
		if clean == ".." || strings.HasPrefix(clean, "../") {
			return nil, invalidf("path %q leaves the repository root", p)
		}
		candidates := []string{clean}
		if hasGlobMeta(clean) {
			matches, err := fs.Glob(os.DirFS(r.root), clean)
			if err != nil {
				return nil, invalidf("path %q is not a valid glob: %v", p, err)
			}
			candidates = matches
		}
		for _, c := range candidates {
			rel, ok, err := r.existingDir(c, p)
			if err != nil {
				return nil, err
			}
			if ok {
				out = append(out, rel)
			}
		}
	}
	return out, nil
}

func hasGlobMeta(p string) bool {
	return strings.ContainsAny(p, `*?[\`)
}

// existingDir resolves rel (clean, relative to the root) and tells whether
// it is a directory inside the root; one that does not exist, or a file,
// is no directory, as for Fleet's glob. given is the path as written, for
// errors.
func (r *reader) existingDir(rel, given string) (string, bool, error) {
	full, err := filepath.EvalSymlinks(r.abs(rel))
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, nil
	}
	if err != nil {
		return "", false, err
	}
	resolved, ok := r.rel(full)
	if !ok {
		return "", false, invalidf("path %q leaves the repository root through a symlink", given)
	}
	st, err := os.Stat(full)
	if err != nil {
		return "", false, err
	}
	return resolved, st.IsDir(), nil
}

// findBundleDirs lists the bundle directories below rel by Fleet's rule:
// rel itself when it holds a fleet.yaml, or when it or a sub-directory not
// below a fleet.yaml holds a .yaml or .yml file; and every sub-directory
// holding a fleet.yaml.
func (r *reader) findBundleDirs(ctx context.Context, rel string) ([]string, error) {
	var dirs []string
	rootAbs := r.abs(rel)
	own, err := hasFleetYAML(rootAbs)
	if err != nil {
		return nil, err
	}
	if !own {
		own, err = hasLooseManifests(ctx, rootAbs)
		if err != nil {
			return nil, err
		}
	}
	if own {
		dirs = append(dirs, rel)
	}
	err = filepath.WalkDir(rootAbs, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() || p == rootAbs {
			return nil // symlinked directories are not followed
		}
		if d.Name() == ".git" {
			return filepath.SkipDir
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		ok, err := hasFleetYAML(p)
		if err != nil {
			return err
		}
		if ok {
			dr, _ := r.rel(p)
			dirs = append(dirs, dr)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	return dirs, nil
}

// hasLooseManifests tells whether dir, or a sub-directory not at or below
// one holding a fleet.yaml, holds a .yaml or .yml file: such files belong
// to no other bundle, so dir must be one. dir itself is known to hold no
// fleet.yaml.
func hasLooseManifests(ctx context.Context, dir string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if !e.IsDir() {
			if ext := path.Ext(e.Name()); ext == ".yaml" || ext == ".yml" {
				return true, nil
			}
		}
	}
	for _, e := range entries {
		if !e.IsDir() || e.Name() == ".git" {
			continue
		}
		sub := filepath.Join(dir, e.Name())
		if own, err := hasFleetYAML(sub); err != nil || own {
			if err != nil {
				return false, err
			}
			continue
		}
		if found, err := hasLooseManifests(ctx, sub); err != nil || found {
			return found, err
		}
	}
	return false, nil
}

// hasFleetYAML tells whether dir holds a fleet.yaml or fleet.yml.
func hasFleetYAML(dir string) (bool, error) {
	for _, n := range fleetYAMLNames {
		st, err := os.Stat(filepath.Join(dir, n))
		if err == nil && !st.IsDir() {
			return true, nil
		}
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return false, err
		}
	}
	return false, nil
}

// DefaultDrivenScanSeparator separates a bundle's base directory from its
// options file in the PATH arguments of `fleet apply --driven-scan`.
const DefaultDrivenScanSeparator = ":"

// ParseBundlePath reads one PATH argument of `fleet apply --driven-scan`:
// "base" or "base<sep>options".
func ParseBundlePath(arg, sep string) (fleet.BundlePath, error) {
	if sep == "" {
		sep = DefaultDrivenScanSeparator
	}
	parts := strings.Split(arg, sep)
	switch len(parts) {
	case 1:
		return fleet.BundlePath{Base: arg}, nil
	case 2:
		return fleet.BundlePath{Base: parts[0], Options: parts[1]}, nil
	}
	return fleet.BundlePath{}, invalidf("invalid bundle path %q: give a directory, or a directory and an options file separated by %q", arg, sep)
}
