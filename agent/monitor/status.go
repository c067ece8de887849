package monitor

import (
	"errors"
	"io"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/yaml"

	"github.com/gitfleet/fleet/agent/release"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// MaxEntries bounds nonReadyStatus and modifiedStatus, as the
// BundleDeployment's schema does.
const MaxEntries = fleet.MaxStatusEntries

// Key identifies an object.
type Key struct {
	GVK             schema.GroupVersionKind
	Namespace, Name string
}

// KeyOf returns an object's key.
func KeyOf(o *unstructured.Unstructured) Key {
	return Key{GVK: o.GroupVersionKind(), Namespace: o.GetNamespace(), Name: o.GetName()}
}

// Options are the BundleDeployment options that affect monitoring.
type Options struct {
	// Ignore lists conditions that do not make an object not ready.
	Ignore fleet.IgnoreOptions
	// Diff lists differences that do not count as modifications.
	Diff *fleet.DiffOptions
}

// OptionsFor picks the monitoring options of a BundleDeployment.
func OptionsFor(o fleet.BundleDeploymentOptions) Options {
	return Options{Ignore: o.Ignore, Diff: o.Diff}
}

// Result is the monitored state of a release's objects.
type Result struct {
	// Ready is true when every desired object that exists is ready.
	Ready bool
	// NonModified is true when every desired object exists, matches, and no
	// extra object exists.
	NonModified bool
	// NonReady lists not-ready objects (at most MaxEntries).
	NonReady []fleet.NonReadyStatus
	// Modified lists missing, modified and extra objects (at most
	// MaxEntries).
	Modified []fleet.ModifiedStatus
	// Resources lists the desired objects.
	Resources []fleet.BundleDeploymentResource
	// Counts counts objects by state.
	Counts fleet.ResourceCounts
	// Incomplete is true when NonReady or Modified were cut to MaxEntries.
	Incomplete bool
	// ToApply are the desired objects that are missing or modified and
	// ToDelete the extra ones: what drift correction acts on.
	ToApply, ToDelete []*unstructured.Unstructured
}

// Evaluate compares the desired objects with the live ones (absent from
// live when missing) and lists the extra objects (labelled for the release,
// not desired).
func Evaluate(desired []*unstructured.Unstructured, live map[Key]*unstructured.Unstructured, extra []*unstructured.Unstructured, o Options) (Result, error) {
	r := Result{Ready: true, NonModified: true}
	var patches []fleet.ComparePatch
	if o.Diff != nil {
		patches = o.Diff.ComparePatches
	}
	for _, d := range desired {
		l := live[KeyOf(d)]
		res := fleet.BundleDeploymentResource{Kind: d.GetKind(), APIVersion: d.GetAPIVersion(), Namespace: d.GetNamespace(), Name: d.GetName()}
		r.Counts.DesiredReady++
		if l == nil && Ignored(d, patches) {
			// Fleet's {"op": "ignore"}: a missing object is no drift either.
			r.Resources = append(r.Resources, res)
			r.Counts.Ready++
			continue
		}
		if l == nil {
			r.Resources = append(r.Resources, res)
			r.Counts.Missing++
			r.NonModified = false
			r.ToApply = append(r.ToApply, d)
			r.addModified(fleet.ModifiedStatus{Kind: d.GetKind(), APIVersion: d.GetAPIVersion(), Namespace: d.GetNamespace(), Name: d.GetName(), Create: true})
			continue
		}
		res.CreatedAt = l.GetCreationTimestamp()
		r.Resources = append(r.Resources, res)
		patch, err := Diff(d, l, patches)
		if err != nil {
			return r, err
		}
		ready, why := Readiness(l, o.Ignore.Conditions)
		switch {
		case patch != "":
			r.Counts.Modified++
		case !ready:
			r.Counts.NotReady++
		default:
			r.Counts.Ready++
		}
		if patch != "" {
			r.NonModified = false
			r.ToApply = append(r.ToApply, d)
			r.addModified(fleet.ModifiedStatus{Kind: d.GetKind(), APIVersion: d.GetAPIVersion(), Namespace: d.GetNamespace(), Name: d.GetName(), Patch: patch})
		}
		if !ready {
			r.Ready = false
			if len(r.NonReady) < MaxEntries {
				r.NonReady = append(r.NonReady, fleet.NonReadyStatus{UID: l.GetUID(), Kind: l.GetKind(), APIVersion: l.GetAPIVersion(),
					Namespace: l.GetNamespace(), Name: l.GetName(), Summary: Summarize(l, why, o.Ignore.Conditions)})
			} else {
				r.Incomplete = true
			}
		}
	}
	sort.Slice(extra, func(i, j int) bool { return keyString(KeyOf(extra[i])) < keyString(KeyOf(extra[j])) })
	for _, e := range extra {
		if release.Kept(e) {
			// Helm kept it when the bundle dropped it (a CRD, unless
			// deleteCRDResources): it is no longer the release's, and
			// drift correction must not delete it.
			continue
		}
		r.Counts.Orphaned++
		r.NonModified = false
		r.ToDelete = append(r.ToDelete, e)
		r.addModified(fleet.ModifiedStatus{Kind: e.GetKind(), APIVersion: e.GetAPIVersion(), Namespace: e.GetNamespace(), Name: e.GetName(), Delete: true})
	}
	return r, nil
}

func (r *Result) addModified(m fleet.ModifiedStatus) {
	if len(r.Modified) < MaxEntries {
		r.Modified = append(r.Modified, m)
		return
	}
	r.Incomplete = true
}

func keyString(k Key) string {
	return k.GVK.String() + "/" + k.Namespace + "/" + k.Name
}

// DesiredObjects parses a release manifest into its objects.
func DesiredObjects(manifest string) ([]*unstructured.Unstructured, error) {
	dec := yaml.NewYAMLOrJSONDecoder(strings.NewReader(manifest), 4096)
	var out []*unstructured.Unstructured
	for {
		var doc map[string]interface{}
		if err := dec.Decode(&doc); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(doc) == 0 {
			continue
		}
		out = append(out, &unstructured.Unstructured{Object: doc})
	}
}
