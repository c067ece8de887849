package bundlereader

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/Masterminds/semver/v3"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/ignore"
	"sigs.k8s.io/yaml"
)

// Chart dependencies are handled as Fleet handles them when it builds a
// bundle: every chart directory among the bundle's files whose Chart.yaml
// lists dependencies missing from its charts/ directory gets them as
// `helm dependency update` would (Fleet's helmupdater): each dependency is
// fetched, newest version allowed by its constraint, into
// charts/<name>-<version>.tgz; chart archives in charts/ no longer wanted are
// removed, and Chart.lock is written unless the one there already matches.
// helm.disableDependencyUpdate turns this off. A chart whose charts/ already
// holds every dependency is left as it is.
//
// Every download goes through the bundle's fetcher: size-capped, and helm
// credentials sent only where HelmAuth's URL pattern allows. A dependency
// that cannot be fetched fails the bundle, naming the dependency and its
// repository: a bundle never goes out without its subcharts.

// updateDependencies updates the dependencies of every chart directory among
// c.files, outermost first. bundleRel is the bundle directory.
func (r *reader) updateDependencies(ctx context.Context, bundleRel string, c *chartCollector) error {
	for _, dir := range chartDirs(c.files) {
		if err := c.updateChart(ctx, r, bundleRel, dir); err != nil {
			return err
		}
	}
	return nil
}

// chartDirs lists the directories (relative to the bundle, "" for its root)
// holding a Chart.yaml, outermost first.
func chartDirs(files fileSet) []string {
	var dirs []string
	for name := range files {
		if path.Base(name) != "Chart.yaml" {
			continue
		}
		dir := path.Dir(name)
		if dir == "." {
			dir = ""
		}
		dirs = append(dirs, dir)
	}
	depth := func(d string) int {
		if d == "" {
			return 0
		}
		return 1 + strings.Count(d, "/")
	}
	sort.Slice(dirs, func(i, j int) bool {
		if di, dj := depth(dirs[i]), depth(dirs[j]); di != dj {
			return di < dj
		}
		return dirs[i] < dirs[j]
	})
	return dirs
}

// under returns the files below dir ("" for all), named relative to it.
func (fs fileSet) under(dir string) map[string][]byte {
	out := map[string][]byte{}
	for name, data := range fs {
		switch {
		case dir == "":
			out[name] = data
		case strings.HasPrefix(name, dir+"/"):
			out[strings.TrimPrefix(name, dir+"/")] = data
		}
	}
	return out
}

// loadChartFiles loads the chart made of files (named relative to the chart).
func loadChartFiles(files map[string][]byte) (*chart.Chart, error) {
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	buffered := make([]*loader.BufferedFile, 0, len(names))
	for _, n := range names {
		buffered = append(buffered, &loader.BufferedFile{Name: n, Data: files[n]})
	}
	return loader.LoadFiles(buffered)
}

// missingDependencies names the dependencies of ch that its charts/
// directory does not hold, as `helm install` checks them.
func missingDependencies(ch *chart.Chart) []string {
	have := map[string]bool{}
	for _, d := range ch.Dependencies() {
		have[d.Name()] = true
	}
	var missing []string
	for _, req := range ch.Metadata.Dependencies {
		if !have[req.Name] {
			missing = append(missing, req.Name)
		}
	}
	return missing
}

// fetched reports whether dir lies in a chart fetched from a repository
// rather than read from the repository's files.
func (c *chartCollector) fetched(dir string) bool {
	for _, d := range c.dirs {
		if dir == d || strings.HasPrefix(dir, d+"/") {
			return true
		}
	}
	return false
}

// updateChart updates the dependencies of the chart in dir.
func (c *chartCollector) updateChart(ctx context.Context, r *reader, bundleRel, dir string) error {
	ch, err := loadChartFiles(c.files.under(dir))
	if err != nil {
		// Not a chart Helm can load: the agent reports it when it
		// deploys; there is nothing to update.
		return nil //nolint:nilerr // the agent reports the chart's error when it deploys
	}
	if len(ch.Metadata.Dependencies) == 0 || len(missingDependencies(ch)) == 0 {
		return nil
	}
	display := path.Join(bundleRel, dir)
	chartsDir := path.Join(dir, "charts")
	if dir == "" {
		chartsDir = "charts"
	}
	added := map[string][]byte{}
	local := map[string]bool{} // dependencies without a repository: kept in charts/
	locked := make([]*chart.Dependency, 0, len(ch.Metadata.Dependencies))
	for _, req := range ch.Metadata.Dependencies {
		lock, archive, err := c.resolveDependency(ctx, r, bundleRel, dir, req)
		if err != nil {
			return fmt.Errorf("chart %s: %w", display, err)
		}
		locked = append(locked, lock)
		if archive == nil {
			local[req.Name] = true
			continue
		}
		added[path.Join(chartsDir, lock.Name+"-"+lock.Version+".tgz")] = archive
	}
	// As helm dependency update does: chart archives in charts/ that are
	// not among the new ones go, except those of dependencies without a
	// repository.
	for name, data := range c.files {
		if path.Dir(name) != chartsDir || added[name] != nil {
			continue
		}
		old, err := loader.LoadArchive(bytes.NewReader(data))
		if err != nil || local[old.Name()] {
			continue
		}
		delete(c.files, name)
	}
	for name, data := range added {
		c.files[name] = data
	}
	digest, err := lockDigest(ch.Metadata.Dependencies, locked)
	if err != nil {
		return err
	}
	if ch.Lock != nil && ch.Lock.Digest == digest {
		return nil // the chart's lock file already says so
	}
	// Generated is left at zero so that the same commit always gives the
	// same bundle (helm writes the current time).
	lock, err := yaml.Marshal(&chart.Lock{Generated: time.Time{}, Digest: digest, Dependencies: locked})
	if err != nil {
		return err
	}
	lockFile := "Chart.lock"
	if ch.Metadata.APIVersion == chart.APIVersionV1 {
		lockFile = "requirements.lock"
	}
	c.files[path.Join(dir, lockFile)] = lock
	return nil
}

// resolveDependency finds the version of one dependency and its packaged
// chart: nil for a dependency without a repository, which must already be
// in charts/.
func (c *chartCollector) resolveDependency(ctx context.Context, r *reader, bundleRel, dir string, req *chart.Dependency) (*chart.Dependency, []byte, error) {
	repoURL := req.Repository
	switch {
	case repoURL == "":
		if !c.has(path.Join(dir, "charts", req.Name)) {
			return nil, nil, invalidf("dependency %s declares no repository and is not in charts/%s: add its repository URL to Chart.yaml, or put the chart there",
				req.Name, req.Name)
		}
		return &chart.Dependency{Name: req.Name, Version: req.Version}, nil, nil
	case strings.HasPrefix(repoURL, "file://"):
		archive, version, err := c.localDependency(ctx, r, bundleRel, dir, req)
		if err != nil {
			return nil, nil, err
		}
		return &chart.Dependency{Name: req.Name, Repository: repoURL, Version: version}, archive, nil
	case strings.HasPrefix(repoURL, "oci://"), strings.HasPrefix(repoURL, "https://"), strings.HasPrefix(repoURL, "http://"):
		var fc *fetchedChart
		var err error
		if strings.HasPrefix(repoURL, "oci://") {
			fc, err = c.fetcher.fetchOCI(ctx, strings.TrimSuffix(repoURL, "/")+"/"+req.Name, req.Version)
		} else {
			fc, err = c.fetcher.fetchFromRepo(ctx, repoURL, req.Name, req.Version)
		}
		if err != nil {
			return nil, nil, fmt.Errorf("fetching dependency %s %s from %s: %w (or vendor it into charts/ and set helm.disableDependencyUpdate)",
				req.Name, displayVersion(req.Version), repoURL, err)
		}
		return &chart.Dependency{Name: req.Name, Repository: repoURL, Version: fc.version}, fc.archive, nil
	}
	return nil, nil, invalidf("dependency %s: repository %q is the name of a repository in a local helm configuration, which the manager does not have: give its URL (https://... or oci://...)",
		req.Name, repoURL)
}

// has tells whether name is a file, or a directory holding files, in c.
func (c *chartCollector) has(name string) bool {
	if _, ok := c.files[name]; ok {
		return true
	}
	for f := range c.files {
		if strings.HasPrefix(f, name+"/") {
			return true
		}
	}
	return false
}

// localDependency packages the chart a file:// dependency points at: from
// the bundle's own files, or else from the repository (never outside it, and
// not from within a fetched chart), as helm does with such a dependency.
func (c *chartCollector) localDependency(ctx context.Context, r *reader, bundleRel, dir string, req *chart.Dependency) ([]byte, string, error) {
	p := strings.TrimPrefix(req.Repository, "file://")
	if path.IsAbs(p) || filepath.IsAbs(p) {
		return nil, "", invalidf("dependency %s: repository %s is outside the repository: use a path relative to the chart", req.Name, req.Repository)
	}
	target := path.Clean(path.Join(dir, p))
	var files map[string][]byte
	var depRel string // the dependency's directory relative to the root, when it is on disk
	if target != ".." && !strings.HasPrefix(target, "../") && c.has(path.Join(target, "Chart.yaml")) {
		files = c.files.under(strings.TrimPrefix(target, "."))
		if !c.fetched(target) {
			depRel = path.Join(bundleRel, target)
		}
	} else {
		if c.fetched(dir) {
			return nil, "", invalidf("dependency %s: repository %s is not inside the fetched chart", req.Name, req.Repository)
		}
		rel, err := r.checkPath(path.Join(bundleRel, target))
		if err != nil {
			return nil, "", fmt.Errorf("dependency %s: repository %s: %w", req.Name, req.Repository, err)
		}
		depRel = rel
		w := &walker{reader: r, bundleAbs: r.abs(rel), bundleRel: rel, files: fileSet{}}
		if err := w.walk(ctx, "", nil); err != nil {
			return nil, "", fmt.Errorf("dependency %s: %w", req.Name, err)
		}
		if limit := r.o.MaxResourceBytes; limit > 0 && w.total > limit {
			return nil, "", invalidf("dependency %s: %s has %s of files, more than %s", req.Name, rel, humanBytes(w.total), humanBytes(limit))
		}
		files = w.files
	}
	if depRel != "" {
		var err error
		if files, err = r.helmIgnore(files, depRel); err != nil {
			return nil, "", fmt.Errorf("dependency %s: %w", req.Name, err)
		}
	}
	dep, err := loadChartFiles(files)
	if err != nil {
		return nil, "", invalidf("dependency %s from %s: %v", req.Name, req.Repository, err)
	}
	if req.Version != "" {
		constraint, err := semver.NewConstraint(req.Version)
		if err != nil {
			return nil, "", invalidf("dependency %s: version %q is not a semver constraint: %v", req.Name, req.Version, err)
		}
		v, err := semver.NewVersion(dep.Metadata.Version)
		if err != nil || !constraint.Check(v) {
			return nil, "", invalidf("dependency %s: the chart at %s has version %s, which %s does not allow",
				req.Name, req.Repository, dep.Metadata.Version, req.Version)
		}
	}
	archive, err := packageChart(dep)
	if err != nil {
		return nil, "", fmt.Errorf("dependency %s: packaging %s: %w", req.Name, req.Repository, err)
	}
	return archive, dep.Metadata.Version, nil
}

// packageChart returns ch as a chart archive, as `helm package` makes it.
func packageChart(ch *chart.Chart) ([]byte, error) {
	tmp, err := os.MkdirTemp("", "fleet-chart-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	p, err := chartutil.Save(ch, tmp)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(p) //nolint:gosec // G304: p is the archive chartutil.Save just wrote in our temporary directory
}

// lockDigest is the digest helm records in Chart.lock: the sha256 of the
// JSON of the requested and the locked dependencies.
func lockDigest(req, locked []*chart.Dependency) (string, error) {
	data, err := json.Marshal([2][]*chart.Dependency{req, locked})
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return "sha256:" + hex.EncodeToString(sum[:]), nil
}

// helmIgnoreFile lists, gitignore-style, the files of a chart that Helm
// leaves out when it loads the chart from a directory.
const helmIgnoreFile = ".helmignore"

// helmIgnore leaves out of a chart's files (named relative to the chart)
// those its .helmignore, in the directory rel of the repository, lists: Helm
// reads it when it packages a file:// dependency from its directory, though
// not when it loads a chart from a bundle's files, as the agent does.
func (r *reader) helmIgnore(files map[string][]byte, rel string) (map[string][]byte, error) {
	dir := r.abs(rel)
	if _, err := os.Lstat(filepath.Join(dir, helmIgnoreFile)); errors.Is(err, fs.ErrNotExist) {
		return files, nil
	} else if err != nil {
		return nil, err
	}
	data, err := r.readFile(dir, helmIgnoreFile)
	if err != nil {
		return nil, err
	}
	rules, err := ignore.Parse(bytes.NewReader(data))
	if err != nil {
		return nil, invalidf("%s: %v", path.Join(rel, helmIgnoreFile), err)
	}
	out := make(map[string][]byte, len(files))
	for name, data := range files {
		if !helmIgnored(rules, dir, name) {
			out[name] = data
		}
	}
	return out, nil
}

// helmIgnored tells whether rules leave out name, or a directory it is in,
// judged by what is on disk below dir, as Helm's directory loader judges it.
func helmIgnored(rules *ignore.Rules, dir, name string) bool {
	parts := strings.Split(name, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		fi, err := os.Lstat(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			return false
		}
		if rules.Ignore(p, fi) {
			return true
		}
	}
	return false
}
