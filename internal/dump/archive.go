package dump

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path"
	"reflect"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/yaml"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/diagnose"
)

// Format names the archive's layout in its manifest.
const Format = "fleet.cattle.io/dump/v1"

const (
	dir          = "fleet-dump"
	manifestFile = "manifest.json"
	eventsFile   = "events.yaml"
	metricsFile  = "metrics.txt"
)

// manifest is the archive's table of contents.
type manifest struct {
	Format       string    `json:"format"`
	Taken        time.Time `json:"taken"`
	Filter       Filter    `json:"filter"`
	Unreadable   []string  `json:"unreadable,omitempty"`
	Absent       []string  `json:"absent,omitempty"`
	MetricsError string    `json:"metricsError,omitempty"`
	Version      string    `json:"version,omitempty"`
}

type list[T any] struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Items      []T    `json:"items"`
}

// files are the object files of an archive: the kind, and where its
// objects are in a Snapshot.
func files(s *diagnose.Snapshot) []struct {
	kind string
	ptr  any
} {
	return []struct {
		kind string
		ptr  any
	}{
		{diagnose.KindCluster, &s.Clusters},
		{diagnose.KindClusterGroup, &s.ClusterGroups},
		{diagnose.KindBundle, &s.Bundles},
		{diagnose.KindBundleDeployment, &s.BundleDeployments},
		{diagnose.KindGitRepo, &s.GitRepos},
		{diagnose.KindHelmOp, &s.HelmOps},
		{diagnose.KindToken, &s.Tokens},
		{diagnose.KindRegistration, &s.Registrations},
		{diagnose.KindLease, &s.Leases},
		{diagnose.KindCAPICluster, &s.CAPIClusters},
	}
}

// optional are the object files an archive may lack: those of kinds older
// dumps did not hold. Read records them in Snapshot.Absent.
var optional = map[string]bool{diagnose.KindCAPICluster: true}

// Write writes a as a gzipped tar. version is the CLI's version, recorded.
func (a *Archive) Write(w io.Writer, version string) error {
	gz := gzip.NewWriter(w)
	tw := tar.NewWriter(gz)
	mod := a.Snapshot.Taken
	put := func(name string, data []byte) error {
		if err := tw.WriteHeader(&tar.Header{Name: path.Join(dir, name), Mode: 0o600, Size: int64(len(data)), ModTime: mod, Typeflag: tar.TypeReg}); err != nil {
			return err
		}
		_, err := tw.Write(data)
		return err
	}
	m, err := json.MarshalIndent(manifest{Format: Format, Taken: a.Snapshot.Taken, Filter: a.Filter, Unreadable: a.Snapshot.Unreadable,
		Absent: a.Snapshot.Absent, MetricsError: a.MetricsError, Version: version}, "", "  ")
	if err != nil {
		return err
	}
	if err := put(manifestFile, m); err != nil {
		return err
	}
	for _, f := range files(&a.Snapshot) {
		data, err := yaml.Marshal(map[string]any{"apiVersion": "v1", "kind": "List", "items": withTypes(f.ptr)})
		if err != nil {
			return fmt.Errorf("%s: %w", f.kind, err)
		}
		if err := put(f.kind+".yaml", data); err != nil {
			return err
		}
	}
	ev, err := yaml.Marshal(list[corev1.Event]{APIVersion: "v1", Kind: "List", Items: a.Events})
	if err != nil {
		return err
	}
	if err := put(eventsFile, ev); err != nil {
		return err
	}
	if a.Metrics != nil {
		if err := put(metricsFile, a.Metrics); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// withTypes sets apiVersion and kind on each item, so that the files read
// as kubectl writes objects.
func withTypes(ptr any) any {
	set := func(items []map[string]any, apiVersion, kind string) []map[string]any {
		for _, it := range items {
			it["apiVersion"], it["kind"] = apiVersion, kind
		}
		return items
	}
	data, err := json.Marshal(ptr)
	if err != nil {
		return []any{}
	}
	var items []map[string]any
	_ = json.Unmarshal(data, &items)
	if items == nil {
		return []any{}
	}
	switch ptr.(type) {
	case *[]fleet.Cluster:
		return set(items, fleet.GroupVersion.String(), "Cluster")
	case *[]fleet.ClusterGroup:
		return set(items, fleet.GroupVersion.String(), "ClusterGroup")
	case *[]fleet.Bundle:
		return set(items, fleet.GroupVersion.String(), "Bundle")
	case *[]fleet.BundleDeployment:
		return set(items, fleet.GroupVersion.String(), "BundleDeployment")
	case *[]fleet.GitRepo:
		return set(items, fleet.GroupVersion.String(), "GitRepo")
	case *[]fleet.HelmOp:
		return set(items, fleet.GroupVersion.String(), "HelmOp")
	case *[]fleet.ClusterRegistrationToken:
		return set(items, fleet.GroupVersion.String(), "ClusterRegistrationToken")
	case *[]fleet.ClusterRegistration:
		return set(items, fleet.GroupVersion.String(), "ClusterRegistration")
	case *[]coordinationv1.Lease:
		return set(items, coordinationv1.SchemeGroupVersion.String(), "Lease")
	case *[]clusterv1.Cluster:
		return set(items, clusterv1.GroupVersion.String(), "Cluster")
	}
	return items
}

// maxFile bounds one file of an archive read back.
const maxFile = 512 << 20

// Read reads an archive Write wrote; name (the file's name) is in its
// errors. A file that is not a gzipped tar, a tar without a manifest, a
// manifest of another format, and an object file that does not decode are
// errors naming the file and, for YAML, the line.
func Read(r io.Reader, name string) (*Archive, error) {
	gz, err := gzip.NewReader(r)
	if err != nil {
		return nil, fmt.Errorf("%s: not a fleet dump archive (a gzipped tar, as fleet dump writes): %w", name, err)
	}
	tr := tar.NewReader(gz)
	contents := map[string][]byte{}
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: corrupt archive: %w", name, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		data, err := io.ReadAll(io.LimitReader(tr, maxFile))
		if err != nil {
			return nil, fmt.Errorf("%s: corrupt archive: %s: %w", name, h.Name, err)
		}
		contents[path.Clean(h.Name)] = data
	}
	raw, ok := contents[path.Join(dir, manifestFile)]
	if !ok {
		return nil, fmt.Errorf("%s: not a fleet dump archive: it has no %s", name, path.Join(dir, manifestFile))
	}
	m := manifest{}
	if err := json.Unmarshal(raw, &m); err != nil {
		return nil, fmt.Errorf("%s: %s: %w", name, path.Join(dir, manifestFile), err)
	}
	if m.Format != Format {
		return nil, fmt.Errorf("%s: %s: format %q, this fleet reads %q", name, path.Join(dir, manifestFile), m.Format, Format)
	}
	a := &Archive{Filter: m.Filter, MetricsError: m.MetricsError, Metrics: contents[path.Join(dir, metricsFile)]}
	a.Snapshot.Taken, a.Snapshot.Unreadable, a.Snapshot.Absent = m.Taken, m.Unreadable, m.Absent
	for _, f := range files(&a.Snapshot) {
		file := path.Join(dir, f.kind+".yaml")
		data, ok := contents[file]
		if !ok && optional[f.kind] {
			a.Snapshot.Absent = append(a.Snapshot.Absent, f.kind)
			continue
		}
		if !ok {
			return nil, fmt.Errorf("%s: %s is missing", name, file)
		}
		if err := decodeItems(data, f.ptr); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", name, file, err)
		}
	}
	if data, ok := contents[path.Join(dir, eventsFile)]; ok {
		if err := decodeItems(data, &a.Events); err != nil {
			return nil, fmt.Errorf("%s: %s: %w", name, path.Join(dir, eventsFile), err)
		}
	}
	return a, nil
}

func decodeItems(data []byte, into any) error {
	var l struct {
		Kind  string          `json:"kind"`
		Items json.RawMessage `json:"items"`
	}
	if err := yaml.Unmarshal(data, &l); err != nil {
		return err
	}
	if l.Kind != "List" {
		return fmt.Errorf("not a List of objects (kind %q)", l.Kind)
	}
	if len(l.Items) == 0 || bytes.Equal(l.Items, []byte("null")) {
		return nil
	}
	if err := json.Unmarshal(l.Items, into); err == nil {
		return nil
	}
	// Name the object that does not decode.
	var raw []json.RawMessage
	if err := json.Unmarshal(l.Items, &raw); err != nil {
		return fmt.Errorf("items: %w", err)
	}
	elem := reflect.TypeOf(into).Elem().Elem()
	for i, r := range raw {
		var meta struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Namespace string `json:"namespace"`
				Name      string `json:"name"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(r, &meta)
		if err := json.Unmarshal(r, reflect.New(elem).Interface()); err != nil {
			return fmt.Errorf("item %d (%s %s/%s): %w", i+1, meta.Kind, meta.Metadata.Namespace, meta.Metadata.Name, err)
		}
	}
	return fmt.Errorf("items do not decode")
}
