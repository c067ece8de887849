// Package bundlediff is `fleet bundlediff`: the drift agents reported on
// their BundleDeployments (status.modifiedStatus, whose patches are JSON
// merge patches restoring the bundle's values), shown per object, and the
// fleet.yaml diff.comparePatches that would ignore it.
package bundlediff

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/summary"
)

// Selector picks BundleDeployments; empty fields select all.
type Selector struct {
	// BundleNamespace and Bundle name the bundle (its workspace and name).
	BundleNamespace string
	Bundle          string
	// Cluster is a Cluster's name (in BundleNamespace when given).
	Cluster string
	// BundleDeployment is "namespace/name".
	BundleDeployment string
}

// Matches tells whether bd is selected.
func (s Selector) Matches(bd *fleet.BundleDeployment) bool {
	return (s.BundleNamespace == "" || bd.Labels[fleet.BundleNamespaceLabel] == s.BundleNamespace) &&
		(s.Bundle == "" || bd.Labels[fleet.BundleNameLabel] == s.Bundle) &&
		(s.Cluster == "" || bd.Labels[fleet.ClusterLabel] == s.Cluster) &&
		(s.BundleDeployment == "" || bd.Namespace+"/"+bd.Name == s.BundleDeployment)
}

// Drifted are the selected BundleDeployments with drift, by namespace and name.
func Drifted(bds []fleet.BundleDeployment, s Selector) []*fleet.BundleDeployment {
	var out []*fleet.BundleDeployment
	for i := range bds {
		bd := &bds[i]
		if s.Matches(bd) && len(bd.Status.ModifiedStatus) > 0 {
			out = append(out, bd)
		}
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].Namespace+"/"+out[i].Name < out[j].Namespace+"/"+out[j].Name
	})
	return out
}

// Change is one field the agent found changed: where, and the bundle's value.
type Change struct {
	Pointer string
	Want    any
}

// Changes lists the fields a merge patch restores, as RFC 6901 pointers, in
// order.
func Changes(patch string) ([]Change, error) {
	if patch == "" {
		return nil, nil
	}
	var doc any
	if err := json.Unmarshal([]byte(patch), &doc); err != nil {
		return nil, fmt.Errorf("patch %q: %w", patch, err)
	}
	var out []Change
	walk("", doc, &out)
	return out, nil
}

func walk(prefix string, v any, out *[]Change) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		*out = append(*out, Change{Pointer: prefix, Want: v})
		return
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		walk(prefix+"/"+escape(k), m[k], out)
	}
}

func escape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

// Print writes the drift of bds, per BundleDeployment and object.
func Print(w io.Writer, bds []*fleet.BundleDeployment) error {
	for _, bd := range bds {
		fmt.Fprintf(w, "# BundleDeployment %s/%s: bundle %s/%s on cluster %s/%s, %s\n", bd.Namespace, bd.Name,
			bd.Labels[fleet.BundleNamespaceLabel], bd.Labels[fleet.BundleNameLabel],
			bd.Labels[fleet.ClusterNamespaceLabel], bd.Labels[fleet.ClusterLabel], summary.State(bd))
		for _, m := range bd.Status.ModifiedStatus {
			name := fleet.ResourceName(m.APIVersion, m.Kind, m.Namespace, m.Name)
			switch {
			case m.Create:
				fmt.Fprintf(w, "%s: missing (the bundle has it, the cluster does not)\n", name)
				continue
			case m.Delete:
				fmt.Fprintf(w, "%s: extra (on the cluster, no longer in the bundle)\n", name)
				continue
			}
			fmt.Fprintf(w, "%s: modified\n", name)
			changes, err := Changes(m.Patch)
			if err != nil {
				return fmt.Errorf("BundleDeployment %s/%s, %s: %w", bd.Namespace, bd.Name, name, err)
			}
			for _, c := range changes {
				want, err := json.Marshal(c.Want)
				if err != nil {
					return fmt.Errorf("BundleDeployment %s/%s, %s, %s: %w", bd.Namespace, bd.Name, name, c.Pointer, err)
				}
				fmt.Fprintf(w, "  %s: the bundle has %s\n", c.Pointer, want)
			}
			fmt.Fprintf(w, "  patch restoring it: %s\n", m.Patch)
		}
		if bd.Status.IncompleteState {
			fmt.Fprintln(w, "  (the agent lists at most 10 objects: there are more)")
		}
	}
	return nil
}

// ComparePatches are, per bundle ("namespace/name"), the
// diff.comparePatches that ignore the drift of bds: the changed fields'
// pointers, and the ignore operation for a missing object. An extra object
// cannot be ignored this way and is left out.
func ComparePatches(bds []*fleet.BundleDeployment) (map[string][]fleet.ComparePatch, error) {
	type key struct{ bundle, apiVersion, kind, namespace, name string }
	pointers := map[key]map[string]bool{}
	ignore := map[key]bool{}
	for _, bd := range bds {
		bundle := bd.Labels[fleet.BundleNamespaceLabel] + "/" + bd.Labels[fleet.BundleNameLabel]
		for _, m := range bd.Status.ModifiedStatus {
			k := key{bundle, m.APIVersion, m.Kind, m.Namespace, m.Name}
			switch {
			case m.Delete:
				continue
			case m.Create:
				ignore[k] = true
				continue
			}
			changes, err := Changes(m.Patch)
			if err != nil {
				return nil, fmt.Errorf("BundleDeployment %s/%s: %w", bd.Namespace, bd.Name, err)
			}
			if pointers[k] == nil {
				pointers[k] = map[string]bool{}
			}
			for _, c := range changes {
				pointers[k][c.Pointer] = true
			}
		}
	}
	keys := map[key]bool{}
	for k := range pointers {
		keys[k] = true
	}
	for k := range ignore {
		keys[k] = true
	}
	sorted := make([]key, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	sort.Slice(sorted, func(i, j int) bool { return fmt.Sprint(sorted[i]) < fmt.Sprint(sorted[j]) })
	out := map[string][]fleet.ComparePatch{}
	for _, k := range sorted {
		p := fleet.ComparePatch{APIVersion: k.apiVersion, Kind: k.kind, Namespace: k.namespace, Name: k.name}
		if ignore[k] {
			p.Operations = []fleet.Operation{{Op: "ignore"}}
		}
		for ptr := range pointers[k] {
			p.JSONPointers = append(p.JSONPointers, ptr)
		}
		sort.Strings(p.JSONPointers)
		out[k.bundle] = append(out[k.bundle], p)
	}
	return out, nil
}

// PrintFleetYAML writes, per bundle, the fleet.yaml fragment holding the
// compare patches.
func PrintFleetYAML(w io.Writer, patches map[string][]fleet.ComparePatch) error {
	bundles := make([]string, 0, len(patches))
	for b := range patches {
		bundles = append(bundles, b)
	}
	sort.Strings(bundles)
	for _, b := range bundles {
		data, err := yaml.Marshal(map[string]any{"diff": fleet.DiffOptions{ComparePatches: patches[b]}})
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "# fleet.yaml of bundle %s\n%s", b, data)
	}
	return nil
}
