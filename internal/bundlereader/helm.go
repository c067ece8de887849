package bundlereader

import (
	"context"
	"fmt"
	"path"
	"strings"

	"sigs.k8s.io/yaml"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// prepareHelm makes a bundle's Helm options self-contained: values files are
// merged into values, remote charts, the bundle's and those of its targets,
// are fetched and added to the files, with helm.chart pointing at them, and
// the charts' missing dependencies are fetched into their charts/ directories
// unless helm.disableDependencyUpdate (see updateDependencies).
func (r *reader) prepareHelm(ctx context.Context, rel string, spec *fleet.BundleSpec, files *fileSet) error {
	bundleAbs := r.abs(rel)
	c := &chartCollector{fetcher: &fetcher{auth: r.o.HelmAuth, maxBytes: r.o.MaxDownloadBytes, dialer: r.o.Dialer}, files: *files, dirs: map[string]string{}}
	var base fleet.HelmOptions
	if h := spec.Helm; h != nil {
		base = *h
		// As in Fleet (bundlereader.readResources), the bundle's own values
		// files are read only for a chart; those of its targets always.
		if h.Chart != "" {
			if err := r.mergeValuesFiles(bundleAbs, "helm", h); err != nil {
				return err
			}
		}
		if isRemote(h) {
			dir, err := c.add(ctx, h.Repo, h.Chart, h.Version)
			if err != nil {
				return err
			}
			h.Chart, h.Repo, h.Version = dir, "", ""
		} else if h.Chart != "" {
			if err := r.checkLocalChart(bundleAbs, h.Chart); err != nil {
				return err
			}
		}
	}
	for i := range spec.Targets {
		h := spec.Targets[i].Helm
		if h == nil {
			continue
		}
		if err := r.mergeValuesFiles(bundleAbs, fmt.Sprintf("targetCustomizations[%d].helm", i), h); err != nil {
			return err
		}
		if h.Repo == "" && h.Version == "" && !isRemoteChart(h.Chart) {
			continue // nothing that needs a chart of its own
		}
		// A target may change any of repo, chart and version; the others
		// come from the bundle.
		eff := fleet.HelmOptions{Repo: first(h.Repo, base.Repo), Chart: first(h.Chart, base.Chart), Version: first(h.Version, base.Version)}
		if !isRemote(&eff) {
			continue
		}
		dir, err := c.add(ctx, eff.Repo, eff.Chart, eff.Version)
		if err != nil {
			return fmt.Errorf("targetCustomizations[%d]: %w", i, err)
		}
		h.Chart, h.Repo, h.Version = dir, "", ""
	}
	if spec.Helm == nil || !spec.Helm.DisableDependencyUpdate {
		if err := r.updateDependencies(ctx, rel, c); err != nil {
			return err
		}
	}
	*files = c.files
	return nil
}

// isRemote tells whether Helm options name a chart to fetch rather than one
// in the bundle.
func isRemote(h *fleet.HelmOptions) bool {
	return h.Repo != "" || isRemoteChart(h.Chart)
}

func isRemoteChart(chart string) bool {
	return strings.HasPrefix(chart, "oci://") || strings.HasPrefix(chart, "http://") || strings.HasPrefix(chart, "https://")
}

func first(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

// checkLocalChart checks that helm.chart names a directory or archive in the
// bundle, since the agent gets nothing else.
func (r *reader) checkLocalChart(bundleAbs, chart string) error {
	clean := path.Clean(strings.TrimPrefix(chart, "./"))
	if path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return invalidf("helm.chart %q is outside the bundle directory; the agent only gets the bundle's files (set helm.repo to fetch a chart)", chart)
	}
	if _, err := r.secureFile(bundleAbs, clean); err != nil {
		return fmt.Errorf("helm.chart: %w (set helm.repo to fetch a chart from a repository)", err)
	}
	return nil
}

// mergeValuesFiles reads h.ValuesFiles, relative to the bundle directory
// (also when they sit in a chart inside it), and merges them, in order, over
// h.Values: as in Fleet, a values file wins over the values of fleet.yaml.
// h.ValuesFiles stays as written, as in Fleet's Bundle; nothing reads it
// after this. Values that come out empty are left unset, as Fleet leaves
// them.
func (r *reader) mergeValuesFiles(bundleAbs, field string, h *fleet.HelmOptions) error {
	if len(h.ValuesFiles) == 0 {
		return nil
	}
	merged := map[string]interface{}{}
	if h.Values != nil {
		merged = h.Values.DeepCopy().Data
		if merged == nil {
			merged = map[string]interface{}{}
		}
	}
	for _, f := range h.ValuesFiles {
		data, err := r.readFile(bundleAbs, f)
		if err != nil {
			return fmt.Errorf("%s.valuesFiles: %w", field, err)
		}
		var values map[string]interface{}
		if err := yaml.Unmarshal(data, &values); err != nil {
			return invalidf("%s.valuesFiles: %s: %v", field, f, err)
		}
		merged = mergeValues(merged, values)
	}
	if len(merged) > 0 {
		h.Values = &fleet.GenericMap{Data: merged}
	}
	return nil
}

// mergeValues merges src into dst as Helm does: maps are merged key by key,
// anything else in src replaces what dst has.
func mergeValues(dst, src map[string]interface{}) map[string]interface{} {
	if dst == nil {
		dst = map[string]interface{}{}
	}
	for k, v := range src {
		if sm, ok := v.(map[string]interface{}); ok {
			if dm, ok := dst[k].(map[string]interface{}); ok {
				dst[k] = mergeValues(dm, sm)
				continue
			}
		}
		dst[k] = v
	}
	return dst
}

// chartCollector adds fetched charts to a bundle's files, each once, under
// the chart's name (or name-version when two versions are needed).
type chartCollector struct {
	fetcher *fetcher
	files   fileSet
	dirs    map[string]string // "ref@version" -> directory in the bundle
}

func (c *chartCollector) add(ctx context.Context, repoURL, chart, version string) (string, error) {
	ch, err := c.fetcher.fetch(ctx, repoURL, chart, version)
	if err != nil {
		return "", err
	}
	key := ch.ref + "@" + ch.version
	if dir, ok := c.dirs[key]; ok {
		return dir, nil
	}
	dir := ch.name
	if c.taken(dir) {
		dir = ch.name + "-" + ch.version
	}
	if c.taken(dir) {
		return "", invalidf("chart %s %s cannot be added as %s/: the bundle already has files there", ch.name, ch.version, dir)
	}
	for _, f := range ch.files {
		c.files[dir+"/"+f.Name] = f.Data
	}
	c.dirs[key] = dir
	return dir, nil
}

func (c *chartCollector) taken(dir string) bool {
	for name := range c.files {
		if name == dir || strings.HasPrefix(name, dir+"/") {
			return true
		}
	}
	return false
}
