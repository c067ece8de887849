package bundlereader

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/egress"
)

// Marks on the errors of resolving a chart version, so that a caller (the
// HelmOp controller) can give each its own condition reason while the
// error keeps the reason and message the GitRepo controller shows.
var (
	// ErrVersionNotFound marks an error where the repository has no such
	// chart, or no version of it matches.
	ErrVersionNotFound = errors.New("chart version not found")
	// ErrInvalidVersion marks an error where the version is neither a
	// version nor a semver range.
	ErrInvalidVersion = errors.New("invalid chart version")
)

// markedError is err, which errors.Is also finds as kind.
type markedError struct {
	err, kind error
}

func (e *markedError) Error() string        { return e.err.Error() }
func (e *markedError) Unwrap() error        { return e.err }
func (e *markedError) Is(target error) bool { return target == e.kind }

func mark(err, kind error) error { return &markedError{err: err, kind: kind} }

// ChartSource names a remote chart as Helm options do: Repo (a chart
// repository URL, or an oci:// reference) with Chart (the chart's name,
// empty for oci://), or Chart alone as an oci:// reference or the URL of a
// packaged chart. Version is an exact version or a semver range.
type ChartSource struct {
	Repo, Chart, Version string
}

// ResolveChartVersion returns the exact version that src.Version names now:
// the newest version of the chart in the repository's index.yaml (or the
// newest tag of the OCI repository) that the range allows, or the version
// itself when it is exact (checked against the index of a chart
// repository; an OCI tag is checked when the chart is pulled). A chart URL
// has no version to resolve: it returns "". Errors marked
// ErrVersionNotFound or ErrInvalidVersion are Stalling; others, such as an
// unreachable repository, are transient. Nothing but the index or the tag
// list is downloaded, through dialer (nil connects anywhere).
func ResolveChartVersion(ctx context.Context, src ChartSource, auth *HelmAuth, maxDownloadBytes int64, dialer *egress.Dialer) (string, error) {
	if maxDownloadBytes <= 0 {
		maxDownloadBytes = DefaultMaxDownloadBytes
	}
	f := &fetcher{auth: auth, maxBytes: maxDownloadBytes, dialer: dialer}
	switch ref := ociRef(src); {
	case ref != "":
		client, err := f.ociClient(ctx, ref)
		if err != nil {
			return "", err
		}
		return resolveOCITag(client, strings.TrimSuffix(ref, "/"), src.Version)
	case src.Repo != "":
		cv, err := f.resolveInRepo(ctx, src.Repo, src.Chart, src.Version)
		if err != nil {
			return "", err
		}
		return cv.Version, nil
	}
	return "", nil
}

// ociRef is the oci:// reference of src, "" when it is not in a registry.
func ociRef(src ChartSource) string {
	switch {
	case strings.HasPrefix(src.Chart, "oci://"):
		return src.Chart
	case strings.HasPrefix(src.Repo, "oci://"):
		if src.Chart == "" {
			return src.Repo
		}
		return strings.TrimSuffix(src.Repo, "/") + "/" + src.Chart
	}
	return ""
}

// ReadRemoteChart makes the Bundle of a HelmOp: spec, whose helm options
// (and those of its targets) name remote charts, with each chart fetched
// into the bundle's files and helm.chart pointing at it, exactly as a
// fleet.yaml naming a remote chart is read. Unnamed targets are named
// target000, target001, ... and a spec without targets gets the default
// target, as Fleet's HelmOp does. Options gives the name, namespace,
// labels, credentials and size limits; nothing is read from disk.
func ReadRemoteChart(ctx context.Context, spec fleet.BundleSpec, o Options) (*fleet.Bundle, error) {
	if spec.Helm == nil || !isRemote(spec.Helm) {
		return nil, invalidf("helm.repo or a chart URL in helm.chart must name the chart to deploy")
	}
	// The reader needs a root; an empty one, so that nothing of the
	// manager's disk can end up in the bundle.
	root, err := os.MkdirTemp("", "remote-chart-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(root)
	r, err := newReader(root, o)
	if err != nil {
		return nil, err
	}
	spec = *spec.DeepCopy()
	spec.Resources = nil
	for i := range spec.Targets {
		if spec.Targets[i].Name == "" {
			spec.Targets[i].Name = fmt.Sprintf("target%03d", i)
		}
	}
	if len(spec.Targets) == 0 {
		spec.Targets = []fleet.BundleTarget{DefaultTarget()}
	}
	files := fileSet{}
	if err := r.prepareHelm(ctx, ".", &spec, &files); err != nil {
		return nil, err
	}
	if limit, n := r.o.MaxResourceBytes, files.size(); limit > 0 && n > limit {
		return nil, invalidf("the chart of bundle %q has %s of files, more than %s, the most a Bundle may hold for the API server: use a smaller chart",
			o.Name, humanBytes(n), humanBytes(limit))
	}
	if spec.Resources, err = files.resources(); err != nil {
		return nil, err
	}
	b := &fleet.Bundle{Spec: spec}
	b.APIVersion = fleet.GroupVersion.String()
	b.Kind = "Bundle"
	b.Name = o.Name
	b.Namespace = o.Namespace
	if len(o.Labels) > 0 {
		b.Labels = map[string]string{}
		for k, v := range o.Labels {
			b.Labels[k] = v
		}
	}
	return b, nil
}
