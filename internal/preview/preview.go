// Package preview is `fleet preview`: what a change of a repository would do
// to every targeted cluster. It targets the Bundles read at two revisions
// with the manager's own targeting (internal/target) and renders each
// cluster's deployment with the agent's rendering (agent/deployer), then
// diffs them per cluster: bundles added, removed or changed, and in a
// changed bundle the objects added, removed or changed, field by field.
package preview

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/gitfleet/fleet/agent/deployer"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/content"
	"github.com/gitfleet/fleet/internal/target"
)

// The changes of bundles and objects.
const (
	Added   = "added"
	Removed = "removed"
	Changed = "changed"
)

// Result is what a change does.
type Result struct {
	From string `json:"from"`
	To   string `json:"to"`
	// Clusters are the clusters where something changes, by name.
	Clusters []ClusterChange `json:"clusters"`
	// Errors are clusters whose deployment could not be worked out.
	Errors []string `json:"errors,omitempty"`
}

// Changes tells whether anything changes.
func (r *Result) Changes() bool { return len(r.Clusters) > 0 }

// ClusterChange is what changes on one cluster.
type ClusterChange struct {
	// Cluster is "namespace/name".
	Cluster string         `json:"cluster"`
	Bundles []BundleChange `json:"bundles"`
}

// BundleChange is one bundle added, removed or changed on a cluster.
type BundleChange struct {
	Bundle string `json:"bundle"`
	Change string `json:"change"`
	// DeploymentID is the new one (the old one when removed).
	DeploymentID string         `json:"deploymentID"`
	Objects      []ObjectChange `json:"objects,omitempty"`
}

// ObjectChange is one rendered object added, removed or changed.
type ObjectChange struct {
	// Object is named as Fleet's messages name it ("configmap.v1 ns/name").
	Object string        `json:"object"`
	Change string        `json:"change"`
	Fields []FieldChange `json:"fields,omitempty"`
}

// FieldChange is one field of a changed object: an RFC 6901 pointer and
// the values before and after (nil when absent).
type FieldChange struct {
	Path string `json:"path"`
	From any    `json:"from"`
	To   any    `json:"to"`
}

// Render renders one deployment of a bundle; Compute uses the agent's
// offline rendering unless told otherwise.
type Render func(ctx context.Context, b *fleet.Bundle, d *target.Deployment) ([]*unstructured.Unstructured, error)

// AgentRender renders as the agent does, without a cluster.
func AgentRender(ctx context.Context, b *fleet.Bundle, d *target.Deployment) ([]*unstructured.Unstructured, error) {
	files, err := deployer.FilesOf(b.Spec.Resources)
	if err != nil {
		return nil, err
	}
	return deployer.Render(ctx, deployer.Input{Name: b.Name, DeploymentID: d.ID, Options: *d.Options, Files: files}, deployer.OfflineScope)
}

type side struct {
	bundle *fleet.Bundle
	ds     map[string]*target.Deployment
}

func deployments(b *fleet.Bundle, in target.Inputs, errs *[]string) (side, error) {
	s := side{bundle: b, ds: map[string]*target.Deployment{}}
	if b == nil {
		return s, nil
	}
	name, _, err := content.Encode(b.Spec.Resources)
	if err != nil {
		return s, fmt.Errorf("bundle %s/%s: %w", b.Namespace, b.Name, err)
	}
	ds, clusterErrs, err := target.Deployments(b, name, in)
	if err != nil {
		return s, fmt.Errorf("bundle %s/%s: %w", b.Namespace, b.Name, err)
	}
	for _, e := range clusterErrs {
		*errs = append(*errs, fmt.Sprintf("bundle %s/%s: %v", b.Namespace, b.Name, e))
	}
	for _, d := range ds {
		s.ds[d.Cluster.Namespace+"/"+d.Cluster.Name] = d
	}
	return s, nil
}

// Compute compares the deployments of the bundles from and to (read at two
// revisions) on the clusters of in.
func Compute(ctx context.Context, from, to []*fleet.Bundle, in target.Inputs, render Render) (*Result, error) {
	if render == nil {
		render = AgentRender
	}
	r := &Result{}
	index := func(bs []*fleet.Bundle) map[string]*fleet.Bundle {
		m := map[string]*fleet.Bundle{}
		for _, b := range bs {
			m[b.Namespace+"/"+b.Name] = b
		}
		return m
	}
	old, cur := index(from), index(to)
	keys := map[string]bool{}
	for k := range old {
		keys[k] = true
	}
	for k := range cur {
		keys[k] = true
	}
	byCluster := map[string][]BundleChange{}
	for _, key := range sortedKeys(keys) {
		before, err := deployments(old[key], in, &r.Errors)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", "from", err)
		}
		after, err := deployments(cur[key], in, &r.Errors)
		if err != nil {
			return nil, err
		}
		clusters := map[string]bool{}
		for c := range before.ds {
			clusters[c] = true
		}
		for c := range after.ds {
			clusters[c] = true
		}
		for _, c := range sortedKeys(clusters) {
			bc, err := compare(ctx, key, before, after, c, render)
			if err != nil {
				return nil, err
			}
			if bc != nil {
				byCluster[c] = append(byCluster[c], *bc)
			}
		}
	}
	for _, c := range sortedKeys(byCluster) {
		r.Clusters = append(r.Clusters, ClusterChange{Cluster: c, Bundles: byCluster[c]})
	}
	return r, nil
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func compare(ctx context.Context, bundle string, before, after side, cluster string, render Render) (*BundleChange, error) {
	b, a := before.ds[cluster], after.ds[cluster]
	if b != nil && a != nil && b.ID == a.ID {
		return nil, nil
	}
	var oldObjs, newObjs []*unstructured.Unstructured
	var err error
	if b != nil {
		if oldObjs, err = render(ctx, before.bundle, b); err != nil {
			return nil, fmt.Errorf("rendering bundle %s for cluster %s before the change: %w", bundle, cluster, err)
		}
	}
	if a != nil {
		if newObjs, err = render(ctx, after.bundle, a); err != nil {
			return nil, fmt.Errorf("rendering bundle %s for cluster %s: %w", bundle, cluster, err)
		}
	}
	bc := &BundleChange{Bundle: bundle, Change: Changed}
	switch {
	case b == nil:
		bc.Change, bc.DeploymentID = Added, a.ID
	case a == nil:
		bc.Change, bc.DeploymentID = Removed, b.ID
	default:
		bc.DeploymentID = a.ID
	}
	bc.Objects = diffObjects(oldObjs, newObjs)
	return bc, nil
}

func objectName(u *unstructured.Unstructured) string {
	return fleet.ResourceName(u.GetAPIVersion(), u.GetKind(), u.GetNamespace(), u.GetName())
}

func diffObjects(before, after []*unstructured.Unstructured) []ObjectChange {
	old, cur := map[string]*unstructured.Unstructured{}, map[string]*unstructured.Unstructured{}
	for _, u := range before {
		old[objectName(u)] = u
	}
	for _, u := range after {
		cur[objectName(u)] = u
	}
	all := map[string]bool{}
	for k := range old {
		all[k] = true
	}
	for k := range cur {
		all[k] = true
	}
	var out []ObjectChange
	for _, k := range sortedKeys(all) {
		o, c := old[k], cur[k]
		switch {
		case o == nil:
			out = append(out, ObjectChange{Object: k, Change: Added})
		case c == nil:
			out = append(out, ObjectChange{Object: k, Change: Removed})
		default:
			if fields := diffFields(o.Object, c.Object); len(fields) > 0 {
				out = append(out, ObjectChange{Object: k, Change: Changed, Fields: fields})
			}
		}
	}
	return out
}

// ignoredPrefixes are fields that change with every deployment, not with
// what the objects say.
var ignoredPrefixes = []string{"/metadata/annotations/" + escape(fleet.DeploymentIDAnnotation)}

func diffFields(a, b map[string]any) []FieldChange {
	fa, fb := map[string]any{}, map[string]any{}
	flatten("", a, fa)
	flatten("", b, fb)
	all := map[string]bool{}
	for k := range fa {
		all[k] = true
	}
	for k := range fb {
		all[k] = true
	}
	var out []FieldChange
	for _, p := range sortedKeys(all) {
		if ignored(p) {
			continue
		}
		va, oka := fa[p]
		vb, okb := fb[p]
		if oka && okb && reflect.DeepEqual(va, vb) {
			continue
		}
		out = append(out, FieldChange{Path: p, From: va, To: vb})
	}
	return out
}

func ignored(p string) bool {
	for _, pre := range ignoredPrefixes {
		if strings.HasPrefix(p, pre) {
			return true
		}
	}
	return false
}

func flatten(prefix string, v any, out map[string]any) {
	if m, ok := v.(map[string]any); ok && len(m) > 0 {
		for k, e := range m {
			flatten(prefix+"/"+escape(k), e, out)
		}
		return
	}
	out[prefix] = v
}

func escape(k string) string {
	return strings.ReplaceAll(strings.ReplaceAll(k, "~", "~0"), "/", "~1")
}

func jsonText(v any) string {
	if v == nil {
		return "(none)"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}
