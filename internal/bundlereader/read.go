package bundlereader

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/outcome"
)

// DefaultMaxResourceBytes is the largest total size of a bundle's resources,
// uncompressed, that Read accepts by default: a Bundle, and the Content made
// from it, must stay below the API server's request size limit (about 3 MiB,
// and etcd's 1.5 MiB value limit).
const DefaultMaxResourceBytes = 1536 * 1024

// Options say how to turn directories into Bundles; the zero value reads
// plain directories as `fleet apply` does.
type Options struct {
	// Name is the base of the bundle names: the GitRepo's name, or the NAME
	// of `fleet apply NAME PATH...`.
	Name string
	// Namespace is the namespace of the Bundles.
	Namespace string
	// Labels are added to every Bundle, e.g. fleet.cattle.io/repo-name; they
	// win over the labels of fleet.yaml.
	Labels map[string]string
	// Commit, when known, is set as the label fleet.cattle.io/commit.
	Commit string
	// TargetsFromRepo are the GitRepo's targets: appended after the
	// targetCustomizations of fleet.yaml and copied to targetRestrictions.
	TargetsFromRepo []fleet.GitTarget
	// TargetNamespace, when set, forces the namespace option of the bundle
	// and of every target (GitRepo spec.targetNamespace).
	TargetNamespace string
	// ServiceAccount, when set, forces the serviceAccount option of the bundle
	// and of every target (GitRepo spec.serviceAccount).
	ServiceAccount string
	// KeepResources, when true, sets keepResources on every bundle.
	KeepResources bool
	// DeleteNamespace, when true, sets deleteNamespace on every bundle.
	DeleteNamespace bool
	// CorrectDrift, when set, replaces the correctDrift of every bundle.
	CorrectDrift *fleet.CorrectDrift
	// ForceSyncGeneration, when not zero, is set on every bundle.
	ForceSyncGeneration int64
	// HelmAuth authenticates to remote chart repositories.
	HelmAuth *HelmAuth
	// MaxResourceBytes is the largest total size of a bundle's resources,
	// uncompressed; 0 means DefaultMaxResourceBytes, a negative value no limit.
	MaxResourceBytes int
	// MaxFileBytes is the largest file read on its own (fleet.yaml,
	// .fleetignore, helm valuesFiles); 0 means DefaultMaxFileBytes.
	MaxFileBytes int64
	// MaxDownloadBytes is the largest chart, chart repository index or
	// registry response downloaded; 0 means DefaultMaxDownloadBytes.
	MaxDownloadBytes int64
	// MaxBundles is the most bundle directories Read accepts; 0 means no
	// limit.
	MaxBundles int
	// Warn, when set, is given each Warning about a fleet.yaml: something
	// ignored rather than refused. Nil drops them.
	Warn func(Warning)
}

// DefaultMaxFileBytes bounds the files read on their own: a file larger than
// a bundle may be would be refused anyway.
const DefaultMaxFileBytes = DefaultMaxResourceBytes

// DefaultMaxDownloadBytes bounds one download from a chart repository or
// registry (the index.yaml of a large public repository is tens of MiB).
const DefaultMaxDownloadBytes = 64 << 20

// HelmAuth holds the credentials for remote chart repositories and
// registries (the GitRepo's helmSecretName).
type HelmAuth struct {
	// Username and Password are sent as basic auth, only to the host of a
	// chart repository or registry whose URL URLRegex matches.
	Username string
	Password string
	// URLRegex decides where the credentials go: to a chart repository,
	// registry or chart URL it matches (see CompileURLRegex), and there only
	// to the host of that URL. Nil sends them nowhere.
	URLRegex *regexp.Regexp
	// CABundle holds PEM certificates trusted in addition to the system's.
	CABundle []byte
	// InsecureSkipVerify turns off TLS certificate verification.
	InsecureSkipVerify bool
}

// invalidf is the error of a bundle that a change to the directory tree,
// fleet.yaml or the options must fix, as opposed to a transient one such as
// an unreachable chart repository: an outcome.Stalling error with
// fleet.ReasonInvalidBundle (%w wraps as in fmt.Errorf).
func invalidf(format string, args ...any) error {
	return outcome.Stallf(fleet.ReasonInvalidBundle, format, args...)
}

var fleetYAMLNames = []string{"fleet.yaml", "fleet.yml"}

// Read returns the Bundles of the bundle directories found below each of
// paths (default "."), which are relative to root and may not leave it, sorted
// by name. Every directory with a fleet.yaml is a bundle; a path with none
// below it is itself one bundle when it holds manifests.
func Read(ctx context.Context, root string, paths []string, o Options) ([]*fleet.Bundle, error) {
	r, err := newReader(root, o)
	if err != nil {
		return nil, err
	}
	if len(paths) == 0 {
		paths = []string{"."}
	}
	var dirs []string
	seen := map[string]bool{}
	for _, p := range paths {
		rel, err := r.checkPath(p)
		if err != nil {
			return nil, err
		}
		found, err := r.findBundleDirs(ctx, rel)
		if err != nil {
			return nil, err
		}
		for _, d := range found {
			if !seen[d] {
				seen[d] = true
				dirs = append(dirs, d)
			}
		}
	}
	if limit := r.o.MaxBundles; limit > 0 && len(dirs) > limit {
		return nil, invalidf("%d bundle directories found, more than the limit of %d per GitRepo: narrow spec.paths, "+
			"or ask the operator to raise the manager's --max-bundles-per-gitrepo", len(dirs), limit)
	}
	var bundles []*fleet.Bundle
	byName := map[string]string{}
	for _, d := range dirs {
		b, err := r.readDir(ctx, d)
		if err != nil {
			return nil, err
		}
		if other, dup := byName[b.Name]; dup {
			return nil, invalidf("bundle name %q is used by both %s and %s: set a different name in one of their fleet.yaml", b.Name, other, d)
		}
		byName[b.Name] = d
		bundles = append(bundles, b)
	}
	sort.Slice(bundles, func(i, j int) bool { return bundles[i].Name < bundles[j].Name })
	return bundles, nil
}

// ReadDir reads the bundle directory dir, relative to root, into a Bundle.
// Sub-directories with a fleet.yaml of their own are left out.
func ReadDir(ctx context.Context, root, dir string, o Options) (*fleet.Bundle, error) {
	r, err := newReader(root, o)
	if err != nil {
		return nil, err
	}
	rel, err := r.checkPath(dir)
	if err != nil {
		return nil, err
	}
	return r.readDir(ctx, rel)
}

// reader reads bundles below one root.
type reader struct {
	root string // absolute, symlinks resolved
	o    Options
}

func newReader(root string, o Options) (*reader, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	abs, err = filepath.EvalSymlinks(abs)
	if err != nil {
		return nil, fmt.Errorf("reading bundles: %w", err)
	}
	if o.MaxResourceBytes == 0 {
		o.MaxResourceBytes = DefaultMaxResourceBytes
	}
	if o.MaxFileBytes <= 0 {
		o.MaxFileBytes = DefaultMaxFileBytes
	}
	if o.MaxDownloadBytes <= 0 {
		o.MaxDownloadBytes = DefaultMaxDownloadBytes
	}
	return &reader{root: abs, o: o}, nil
}

// checkPath validates a path given relative to the root and returns it
// cleaned, slash separated, with symlinks resolved.
func (r *reader) checkPath(p string) (string, error) {
	if p == "" {
		p = "."
	}
	if filepath.IsAbs(p) || path.IsAbs(filepath.ToSlash(p)) {
		return "", invalidf("path %q must be relative to the repository root", p)
	}
	clean := filepath.Clean(p)
	if clean == ".." || strings.HasPrefix(clean, ".."+string(filepath.Separator)) {
		return "", invalidf("path %q leaves the repository root", p)
	}
	full, err := filepath.EvalSymlinks(filepath.Join(r.root, clean))
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", invalidf("path %q does not exist", p)
		}
		return "", err
	}
	rel, ok := r.rel(full)
	if !ok {
		return "", invalidf("path %q leaves the repository root through a symlink", p)
	}
	st, err := os.Stat(full)
	if err != nil {
		return "", err
	}
	if !st.IsDir() {
		return "", invalidf("path %q is not a directory", p)
	}
	return rel, nil
}

// rel returns abs relative to the root, slash separated, and whether it is
// inside the root at all.
func (r *reader) rel(abs string) (string, bool) {
	rel, err := filepath.Rel(r.root, abs)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return "", false
	}
	return filepath.ToSlash(rel), true
}

func (r *reader) abs(rel string) string {
	return filepath.Join(r.root, filepath.FromSlash(rel))
}

// findBundleDirs lists the bundle directories below rel.
func (r *reader) findBundleDirs(ctx context.Context, rel string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(r.abs(rel), func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
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
	if len(dirs) > 0 {
		return dirs, nil
	}
	manifests, err := hasManifests(r.abs(rel))
	if err != nil || !manifests {
		return nil, err
	}
	return []string{rel}, nil
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

// hasManifests tells whether dir directly holds a file that can be a
// manifest (YAML or JSON), a chart or a kustomization.
func hasManifests(dir string) (bool, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return false, err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".yaml", ".yml", ".json":
			return true, nil
		}
	}
	return false, nil
}

// readDir builds the Bundle of the bundle directory rel.
func (r *reader) readDir(ctx context.Context, rel string) (*fleet.Bundle, error) {
	fy, err := r.readFleetYAML(rel)
	if err != nil {
		return nil, err
	}
	name := fy.Name
	if name == "" {
		name = names.Bundle(r.o.Name, rel)
	} else if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 || len(name) > names.MaxBundleNameLength {
		return nil, invalidf("%s: name %q is not a valid bundle name: it must be at most %d lower-case letters, digits, '-' or '.', starting and ending with a letter or digit",
			path.Join(rel, "fleet.yaml"), name, names.MaxBundleNameLength)
	}
	files, total, err := r.collectFiles(ctx, rel)
	if err != nil {
		return nil, err
	}
	if err := r.checkSize(name, rel, total); err != nil {
		return nil, err
	}
	spec := fleet.BundleSpec{
		BundleDeploymentOptions: fy.BundleDeploymentOptions,
		Paused:                  fy.Paused,
		RolloutStrategy:         fy.RolloutStrategy,
		DependsOn:               fy.DependsOn,
		TargetCustomizationMode: fy.TargetCustomizationMode,
	}
	spec.Targets, spec.TargetRestrictions = targets(fy, r.o.TargetsFromRepo)
	if err := r.prepareHelm(ctx, rel, &spec, &files); err != nil {
		return nil, fmt.Errorf("bundle %s: %w", displayDir(rel), err)
	}
	r.applyRepoOptions(&spec)

	if err := r.checkSize(name, rel, files.size()); err != nil {
		return nil, err
	}
	if spec.Resources, err = files.resources(); err != nil {
		return nil, err
	}

	b := &fleet.Bundle{Spec: spec}
	b.APIVersion = fleet.GroupVersion.String()
	b.Kind = "Bundle"
	b.Name = name
	b.Namespace = r.o.Namespace
	b.Labels = r.labels(fy)
	return b, nil
}

// checkSize fails when a bundle's resources are larger than the limit.
func (r *reader) checkSize(name, rel string, total int) error {
	if limit := r.o.MaxResourceBytes; limit > 0 && total > limit {
		return invalidf("bundle %q in %s has %s of resources, more than %s: bundle too large for the API server's request limit; "+
			"leave files out with a .fleetignore or split the directory into several bundles",
			name, displayDir(rel), humanBytes(total), humanBytes(limit))
	}
	return nil
}

// readFleetYAML parses the fleet.yaml of rel, or returns an empty one.
func (r *reader) readFleetYAML(rel string) (*FleetYAML, error) {
	var found []string
	for _, n := range fleetYAMLNames {
		if st, err := os.Stat(filepath.Join(r.abs(rel), n)); err == nil && !st.IsDir() {
			found = append(found, n)
		}
	}
	switch len(found) {
	case 0:
		return &FleetYAML{}, nil
	case 2:
		return nil, invalidf("%s has both fleet.yaml and fleet.yml: keep one", displayDir(rel))
	}
	file := path.Join(rel, found[0])
	data, err := r.readFile(r.abs(rel), found[0])
	if err != nil {
		return nil, err
	}
	fy, warnings, err := ParseFleetYAML(data, file)
	if err != nil {
		return nil, outcome.Stall(fleet.ReasonInvalidBundle, err)
	}
	for _, w := range warnings {
		if r.o.Warn != nil {
			r.o.Warn(w)
		}
	}
	return fy, nil
}

// secureFile joins dir and the relative name and checks that the file, with
// symlinks resolved, is inside the root.
func (r *reader) secureFile(dir, name string) (string, error) {
	if filepath.IsAbs(name) || path.IsAbs(name) {
		return "", invalidf("%q must be a path relative to the bundle directory", name)
	}
	full := filepath.Join(dir, filepath.FromSlash(name))
	rel, ok := r.rel(full)
	if !ok {
		return "", invalidf("%q leaves the repository root", name)
	}
	resolved, err := filepath.EvalSymlinks(full)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", invalidf("%s does not exist", rel)
		}
		return "", err
	}
	if _, ok := r.rel(resolved); !ok {
		return "", invalidf("%s points outside the repository root", rel)
	}
	return resolved, nil
}

// readFile reads the file name, relative to dir, that must resolve to a
// regular file inside the root no larger than MaxFileBytes: a symlink to
// /dev/zero or a huge file in a repository must not exhaust the manager.
func (r *reader) readFile(dir, name string) ([]byte, error) {
	full, err := r.secureFile(dir, name)
	if err != nil {
		return nil, err
	}
	rel, _ := r.rel(full)
	f, err := os.Open(full)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, invalidf("%s is not a regular file", rel)
	}
	limit := r.o.MaxFileBytes
	if st.Size() > limit {
		return nil, invalidf("%s has %s, more than the limit of %s for a file read on its own: make it smaller", rel, humanBytes(int(st.Size())), humanBytes(int(limit)))
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, invalidf("%s grew beyond the limit of %s while being read", rel, humanBytes(int(limit)))
	}
	return data, nil
}

// CompileURLRegex compiles a GitRepo's helmRepoURLRegex so that it must
// match a whole URL: an unanchored "charts.example.com" would also match
// https://evil.test/charts.example.com.
func CompileURLRegex(expr string) (*regexp.Regexp, error) {
	return regexp.Compile(`^(?:` + expr + `)$`)
}

// targets computes a bundle's targets and target restrictions from
// fleet.yaml and the GitRepo's targets.
func targets(fy *FleetYAML, fromRepo []fleet.GitTarget) ([]fleet.BundleTarget, []fleet.BundleTargetRestriction) {
	if len(fy.OverrideTargets) > 0 {
		var ts []fleet.BundleTarget
		var rs []fleet.BundleTargetRestriction
		for i, t := range fy.OverrideTargets {
			ts = append(ts, bundleTarget(t, i))
			rs = append(rs, restriction(t, i))
		}
		return ts, rs
	}
	ts := append([]fleet.BundleTarget(nil), fy.TargetCustomizations...)
	var rs []fleet.BundleTargetRestriction
	for i, t := range fromRepo {
		ts = append(ts, bundleTarget(t, i))
		rs = append(rs, restriction(t, i))
	}
	if len(fromRepo) == 0 {
		// A GitRepo without targets targets the default cluster group, as
		// Fleet's GitRepo default does; customizations stay in front of it.
		ts = append(ts, fleet.BundleTarget{Name: fleet.DefaultTargetName, ClusterGroup: fleet.DefaultClusterGroup})
	}
	return ts, rs
}

// targetName names unnamed GitRepo targets as Fleet does: target000, ...
func targetName(name string, i int) string {
	if name != "" {
		return name
	}
	return fmt.Sprintf("target%03d", i)
}

func bundleTarget(t fleet.GitTarget, i int) fleet.BundleTarget {
	return fleet.BundleTarget{
		Name:                 targetName(t.Name, i),
		ClusterName:          t.ClusterName,
		ClusterSelector:      t.ClusterSelector.DeepCopy(),
		ClusterGroup:         t.ClusterGroup,
		ClusterGroupSelector: t.ClusterGroupSelector.DeepCopy(),
	}
}

func restriction(t fleet.GitTarget, i int) fleet.BundleTargetRestriction {
	return fleet.BundleTargetRestriction{
		Name:                 targetName(t.Name, i),
		ClusterName:          t.ClusterName,
		ClusterSelector:      t.ClusterSelector.DeepCopy(),
		ClusterGroup:         t.ClusterGroup,
		ClusterGroupSelector: t.ClusterGroupSelector.DeepCopy(),
	}
}

// applyRepoOptions copies the GitRepo-level options that are set into the
// bundle. The namespace and service account are forced on every target too,
// so that a targetCustomization cannot escape what the GitRepo (and its
// GitRepoRestriction) allow.
func (r *reader) applyRepoOptions(spec *fleet.BundleSpec) {
	o := r.o
	if o.TargetNamespace != "" {
		spec.TargetNamespace = o.TargetNamespace
	}
	if o.ServiceAccount != "" {
		spec.ServiceAccount = o.ServiceAccount
	}
	for i := range spec.Targets {
		t := &spec.Targets[i]
		if o.TargetNamespace != "" && t.TargetNamespace != "" {
			t.TargetNamespace = o.TargetNamespace
		}
		if o.ServiceAccount != "" && t.ServiceAccount != "" {
			t.ServiceAccount = o.ServiceAccount
		}
	}
	if o.KeepResources {
		spec.KeepResources = true
	}
	if o.DeleteNamespace {
		spec.DeleteNamespace = true
	}
	if o.CorrectDrift != nil {
		spec.CorrectDrift = o.CorrectDrift.DeepCopy()
	}
	if o.ForceSyncGeneration != 0 {
		spec.ForceSyncGeneration = o.ForceSyncGeneration
	}
}

// labels are those of fleet.yaml, then the options' labels, then the commit.
func (r *reader) labels(fy *FleetYAML) map[string]string {
	out := map[string]string{}
	for k, v := range fy.Labels {
		out[k] = v
	}
	for k, v := range r.o.Labels {
		out[k] = v
	}
	if r.o.Commit != "" {
		out[fleet.CommitLabel] = r.o.Commit
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

func displayDir(rel string) string {
	if rel == "" || rel == "." {
		return "the root directory"
	}
	return rel
}

func humanBytes(n int) string {
	switch {
	case n >= 1024*1024:
		return fmt.Sprintf("%.1f MiB (%d bytes)", float64(n)/(1024*1024), n)
	case n >= 1024:
		return fmt.Sprintf("%.1f KiB (%d bytes)", float64(n)/1024, n)
	}
	return fmt.Sprintf("%d bytes", n)
}
