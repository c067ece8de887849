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

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/egress"
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
	// TargetsFromRepo are the GitRepo's targets (see RepoTargets): appended
	// after the targetCustomizations of fleet.yaml and copied to
	// targetRestrictions, unless fleet.yaml has overrideTargets. Nil for
	// `fleet apply`.
	TargetsFromRepo []fleet.GitTarget
	// TargetsFile, when set, holds targets and target restrictions appended as
	// they are, where TargetsFromRepo's go: `fleet apply --targets-file`, the
	// way Fleet's GitRepo job passes a GitRepo's targets.
	TargetsFile *TargetsFile
	// TargetNamespace, when set, forces the namespace option of the bundle
	// and of every target (GitRepo spec.targetNamespace).
	TargetNamespace string
	// AllowedTargetNamespaceSelector, when set, is put in every bundle's
	// options (from the GitRepoRestrictions): the agent deploys only into
	// a namespace it selects. A target's options cannot change it.
	AllowedTargetNamespaceSelector *metav1.LabelSelector
	// ServiceAccount, when set, forces the serviceAccount option of the bundle
	// and of every target (GitRepo spec.serviceAccount).
	ServiceAccount string
	// KeepResources, when true, sets keepResources on every bundle.
	KeepResources bool
	// DeleteNamespace, when true, sets deleteNamespace on every bundle.
	DeleteNamespace bool
	// CorrectDrift, when set and enabled, replaces the correctDrift of every
	// bundle; disabled, it leaves each fleet.yaml's (as Fleet does).
	CorrectDrift *fleet.CorrectDrift
	// ForceSyncGeneration is set on every bundle, over any fleet.yaml's: the
	// GitRepo's forceSyncGeneration alone redeploys (as Fleet does).
	ForceSyncGeneration int64
	// HelmAuth authenticates to remote chart repositories.
	HelmAuth *HelmAuth
	// Dialer connects to chart repositories, registries and chart URLs
	// (and every redirect); nil connects anywhere, as `fleet apply` does.
	// The manager gives one with its outbound policy: a repository's
	// fleet.yaml names these hosts.
	Dialer *egress.Dialer
	// MaxResourceBytes is the largest total size of a bundle's resources,
	// uncompressed; 0 means DefaultMaxResourceBytes, a negative value no limit.
	MaxResourceBytes int
	// SizeLimit names MaxResourceBytes in the error of a bundle over it, and
	// SizeAdvice says what to do; empty, they speak of the API server's
	// request limit, and of .fleetignore and splitting.
	SizeLimit, SizeAdvice string
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

// Read returns the Bundles found below each of paths (default "."), sorted
// by name, as Fleet's scan finds them: see expandPaths for the paths and
// findBundleDirs for which directories are bundles. A bundle without any
// resource is left out, as Fleet leaves it out.
func Read(ctx context.Context, root string, paths []string, o Options) ([]*fleet.Bundle, error) {
	r, err := newReader(root, o)
	if err != nil {
		return nil, err
	}
	bases, err := r.expandPaths(paths)
	if err != nil {
		return nil, err
	}
	var srcs []source
	seen := map[string]bool{}
	for _, base := range bases {
		found, err := r.findBundleDirs(ctx, base)
		if err != nil {
			return nil, err
		}
		for _, d := range found {
			if !seen[d] {
				seen[d] = true
				srcs = append(srcs, source{dir: d})
			}
		}
	}
	return r.readAll(ctx, srcs)
}

// ReadDriven returns the Bundles that bundles name, sorted by name, as
// Fleet's driven scan makes them (GitRepo spec.bundles, `fleet apply
// --driven-scan`): each base directory, relative to root, is one bundle with
// every file below it, configured by its options file (relative to the base;
// default its fleet.yaml) and named after the base and the options file.
// Nothing below a base is searched for other bundles.
func ReadDriven(ctx context.Context, root string, bundles []fleet.BundlePath, o Options) ([]*fleet.Bundle, error) {
	r, err := newReader(root, o)
	if err != nil {
		return nil, err
	}
	var srcs []source
	for _, b := range bundles {
		rel, err := r.checkPath(b.Base)
		if err != nil {
			return nil, err
		}
		src := source{dir: rel}
		if b.Options != "" {
			full, err := r.secureFile(r.abs(rel), b.Options)
			if err != nil {
				return nil, fmt.Errorf("options file of bundle %s: %w", b.Base, err)
			}
			optRel, _ := r.rel(full)
			src.options = path.Clean(filepath.ToSlash(b.Options))
			src.optionsRel = optRel
		}
		srcs = append(srcs, src)
	}
	return r.readAll(ctx, srcs)
}

// source is one bundle to read: its directory and, in a driven scan, its
// options file.
type source struct {
	dir string // relative to the root
	// options is the options file relative to dir, "" for fleet.yaml;
	// optionsRel the same relative to the root.
	options, optionsRel string
}

// readAll reads the sources into Bundles sorted by name, leaving out those
// without resources.
func (r *reader) readAll(ctx context.Context, srcs []source) ([]*fleet.Bundle, error) {
	if limit := r.o.MaxBundles; limit > 0 && len(srcs) > limit {
		return nil, invalidf("%d bundle directories found, more than the limit of %d per GitRepo: narrow spec.paths, "+
			"or ask the operator to raise the manager's --max-bundles-per-gitrepo", len(srcs), limit)
	}
	var bundles []*fleet.Bundle
	byName := map[string]string{}
	for _, src := range srcs {
		b, err := r.readDir(ctx, src)
		if err != nil {
			return nil, err
		}
		if len(b.Spec.Resources) == 0 {
			continue
		}
		where := displayDir(src.dir)
		if src.options != "" {
			where += " with " + src.options
		}
		if other, dup := byName[b.Name]; dup {
			return nil, invalidf("bundle name %q is used by both %s and %s: set a different name in one of their fleet.yaml", b.Name, other, where)
		}
		byName[b.Name] = where
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
	return r.readDir(ctx, source{dir: rel})
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

// readDir builds the Bundle of one source.
func (r *reader) readDir(ctx context.Context, src source) (*fleet.Bundle, error) {
	rel := src.dir
	fy, file, err := r.readFleetYAML(src)
	if err != nil {
		return nil, err
	}
	name := fy.Name
	if name == "" {
		name = names.Bundle(r.o.Name, bundleID(src))
		if err := r.checkDerivedName(name, file); err != nil {
			return nil, err
		}
	} else if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 || len(name) > names.MaxBundleNameLength {
		return nil, invalidf("%s: name %q is not a valid bundle name: it must be at most %d lower-case letters, digits, '-' or '.', starting and ending with a letter or digit",
			file, name, names.MaxBundleNameLength)
	}
	spec := fleet.BundleSpec{
		BundleDeploymentOptions: fy.BundleDeploymentOptions,
		Paused:                  fy.Paused,
		RolloutStrategy:         fy.RolloutStrategy,
		DependsOn:               fy.DependsOn,
		TargetCustomizationMode: fy.TargetCustomizationMode,
	}
	spec.Targets, spec.TargetRestrictions = targets(fy, r.o.repoTargets())
	files, total, err := r.collectFiles(ctx, rel, configFiles(src, &spec))
	if err != nil {
		return nil, err
	}
	if err := r.checkSize(name, rel, total); err != nil {
		return nil, err
	}
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

// bundleID is what a bundle's default name is made from, after the base
// name: its directory and, in a driven scan, its options file without the
// extension, so that one directory can give a bundle per options file.
func bundleID(src source) string {
	if src.options == "" {
		return src.dir
	}
	return path.Join(src.dir, strings.TrimSuffix(src.options, path.Ext(src.options)))
}

// configFiles are the files of a bundle that configure it rather than being
// deployed, relative to its directory: fleet.yaml, the options file of a
// driven scan, and the Helm values files. As in Fleet, a values file is
// also left out by its base name at the bundle's top, since a fleet.yaml
// may name it either way.
func configFiles(src source, spec *fleet.BundleSpec) map[string]bool {
	out := map[string]bool{}
	for _, n := range fleetYAMLNames {
		out[n] = true
	}
	if src.options != "" {
		out[src.options] = true
	}
	add := func(h *fleet.HelmOptions) {
		if h == nil {
			return
		}
		for _, f := range h.ValuesFiles {
			clean := path.Clean(filepath.ToSlash(f))
			out[clean] = true
			out[path.Base(clean)] = true
		}
	}
	add(spec.Helm)
	for i := range spec.Targets {
		add(spec.Targets[i].Helm)
	}
	return out
}

// checkSize fails when a bundle's resources are larger than the limit.
func (r *reader) checkSize(name, rel string, total int) error {
	if limit := r.o.MaxResourceBytes; limit > 0 && total > limit {
		what, advice := r.o.SizeLimit, r.o.SizeAdvice
		if what == "" {
			what = "the API server's request limit"
		}
		if advice == "" {
			advice = "leave files out with a .fleetignore or split the directory into several bundles"
		}
		return invalidf("bundle %q in %s has %s of resources, more than %s: bundle too large for %s; %s",
			name, displayDir(rel), humanBytes(total), humanBytes(limit), what, advice)
	}
	return nil
}

// readFleetYAML parses the options of a source (its fleet.yaml, or the
// options file of a driven scan), or returns empty ones, and the file's
// path relative to the root for messages.
func (r *reader) readFleetYAML(src source) (*FleetYAML, string, error) {
	rel := src.dir
	var found []string
	if src.options != "" {
		found = []string{src.options}
	} else {
		for _, n := range fleetYAMLNames {
			if st, err := os.Stat(filepath.Join(r.abs(rel), n)); err == nil && !st.IsDir() {
				found = append(found, n)
			}
		}
	}
	switch len(found) {
	case 0:
		return &FleetYAML{}, path.Join(rel, "fleet.yaml"), nil
	case 2:
		return nil, "", invalidf("%s has both fleet.yaml and fleet.yml: keep one", displayDir(rel))
	}
	file := path.Join(rel, found[0])
	data, err := r.readFile(r.abs(rel), found[0])
	if err != nil {
		return nil, "", err
	}
	fy, warnings, err := ParseFleetYAML(data, file)
	if err != nil {
		return nil, "", outcome.Stall(fleet.ReasonInvalidBundle, err)
	}
	for _, w := range warnings {
		if r.o.Warn != nil {
			r.o.Warn(w)
		}
	}
	return fy, file, nil
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
	f, err := os.Open(full) //nolint:gosec // G304: full is a regular file inside the root, checked by secureFile
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

// targets computes a bundle's targets and target restrictions as Fleet
// does: the targets of fleet.yaml, then its targetCustomizations (unnamed
// ones named target000, target001, ... by their place in that list); then
// the overrideTargets of fleet.yaml, each also a target restriction, when it
// has the key, else the GitRepo's targets and restrictions (repo); and only
// when that leaves no target at all, the default target {name: default,
// clusterGroup: default}. repo is empty for `fleet apply`; the GitRepo
// controller passes the GitRepo's targets, or the default target when it has
// none, as Fleet's GitRepo does (RepoTargets).
func targets(fy *FleetYAML, repo TargetsFile) ([]fleet.BundleTarget, []fleet.BundleTargetRestriction) {
	var ts []fleet.BundleTarget
	ts = append(ts, fy.Targets...)
	ts = append(ts, fy.TargetCustomizations...)
	for i := range ts {
		if ts[i].Name == "" {
			ts[i].Name = fmt.Sprintf("target%03d", i)
		}
	}
	var rs []fleet.BundleTargetRestriction
	if fy.OverrideTargets != nil {
		o := targetsOf(fy.OverrideTargets)
		ts, rs = append(ts, o.Targets...), o.TargetRestrictions
	} else {
		ts = append(ts, repo.Targets...)
		rs = append(rs, repo.TargetRestrictions...)
	}
	if len(ts) == 0 {
		ts = []fleet.BundleTarget{DefaultTarget()}
	}
	return ts, rs
}

// TargetsFile is the file of `fleet apply --targets-file`, the part of a
// BundleSpec that Fleet's GitRepo job writes: the GitRepo's targets, and the
// same again as target restrictions.
type TargetsFile struct {
	Targets            []fleet.BundleTarget            `json:"targets,omitempty"`
	TargetRestrictions []fleet.BundleTargetRestriction `json:"targetRestrictions,omitempty"`
}

// ReadTargetsFile reads a TargetsFile, JSON or YAML.
func ReadTargetsFile(file string) (*TargetsFile, error) {
	data, err := os.ReadFile(file) //nolint:gosec // G304: the targets file the user named on the command line
	if err != nil {
		return nil, err
	}
	tf := &TargetsFile{}
	if err := yaml.UnmarshalStrict(data, tf); err != nil {
		return nil, fmt.Errorf("targets file %s: %w", file, err)
	}
	return tf, nil
}

// targetsOf turns GitRepo targets into bundle targets and the same target
// restrictions, names as given.
func targetsOf(gts []fleet.GitTarget) TargetsFile {
	var tf TargetsFile
	for _, t := range gts {
		tf.Targets = append(tf.Targets, fleet.BundleTarget{
			Name:                 t.Name,
			ClusterName:          t.ClusterName,
			ClusterSelector:      t.ClusterSelector.DeepCopy(),
			ClusterGroup:         t.ClusterGroup,
			ClusterGroupSelector: t.ClusterGroupSelector.DeepCopy(),
		})
		tf.TargetRestrictions = append(tf.TargetRestrictions, fleet.BundleTargetRestriction{
			Name:                 t.Name,
			ClusterName:          t.ClusterName,
			ClusterSelector:      t.ClusterSelector.DeepCopy(),
			ClusterGroup:         t.ClusterGroup,
			ClusterGroupSelector: t.ClusterGroupSelector.DeepCopy(),
		})
	}
	return tf
}

// repoTargets are the targets and restrictions the options give the
// bundles, from the GitRepo and the targets file.
func (o Options) repoTargets() TargetsFile {
	tf := targetsOf(o.TargetsFromRepo)
	if f := o.TargetsFile; f != nil {
		tf.Targets = append(tf.Targets, f.Targets...)
		tf.TargetRestrictions = append(tf.TargetRestrictions, f.TargetRestrictions...)
	}
	return tf
}

// DefaultTarget is the target of a bundle that has no other: the cluster
// group "default".
func DefaultTarget() fleet.BundleTarget {
	return fleet.BundleTarget{Name: fleet.DefaultTargetName, ClusterGroup: fleet.DefaultClusterGroup}
}

// RepoTargets are the targets a GitRepo gives its bundles: its own, or, when
// it has none, the default target, as Fleet's GitRepo does.
func RepoTargets(targets []fleet.GitTarget) []fleet.GitTarget {
	if len(targets) == 0 {
		return []fleet.GitTarget{{Name: fleet.DefaultTargetName, ClusterGroup: fleet.DefaultClusterGroup}}
	}
	return targets
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
	if o.AllowedTargetNamespaceSelector != nil {
		spec.AllowedTargetNamespaceSelector = o.AllowedTargetNamespaceSelector.DeepCopy()
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
	if o.CorrectDrift != nil && o.CorrectDrift.Enabled {
		spec.CorrectDrift = o.CorrectDrift.DeepCopy()
	}
	spec.ForceSyncGeneration = o.ForceSyncGeneration
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
