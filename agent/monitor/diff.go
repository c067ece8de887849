package monitor

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"math"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// serverMetadata are metadata fields the API server sets: never drift.
var serverMetadata = []string{
	"creationTimestamp", "resourceVersion", "uid", "generation", "managedFields", "selfLink",
	"deletionTimestamp", "deletionGracePeriodSeconds",
}

// Diff compares a live object with the desired one on the fields the desired
// one sets (so status, server-set metadata and defaulted fields never count)
// after applying the matching diff.comparePatches to both. It returns a JSON
// merge patch that would restore the differing fields, "" when none differ.
func Diff(desired, live *unstructured.Unstructured, patches []fleet.ComparePatch) (string, error) {
	if Ignored(desired, patches) {
		return "", nil
	}
	d := runtime.DeepCopyJSON(desired.Object)
	l := runtime.DeepCopyJSON(live.Object)
	normalizeSecret(d)
	for _, doc := range []map[string]interface{}{d, l} {
		delete(doc, "status")
		if md, ok := doc["metadata"].(map[string]interface{}); ok {
			for _, f := range serverMetadata {
				delete(md, f)
			}
		}
	}
	for _, p := range patches {
		if !patchMatches(p, desired) {
			continue
		}
		for _, ptr := range p.JSONPointers {
			if err := removePointer(d, ptr); err != nil {
				return "", err
			}
			if err := removePointer(l, ptr); err != nil {
				return "", err
			}
		}
		for _, op := range p.Operations {
			for _, doc := range []map[string]interface{}{d, l} {
				var err error
				switch op.Op {
				case "remove":
					err = removePointer(doc, op.Path)
				case "add", "replace":
					err = setPointer(doc, op.Path, operationValue(op.Value))
				default:
					err = fmt.Errorf("comparePatches: unsupported operation %q", op.Op)
				}
				if err != nil {
					return "", err
				}
			}
		}
	}
	patch, differs := subsetDiff(d, l, false)
	if !differs {
		return "", nil
	}
	b, err := json.Marshal(patch)
	return string(b), err
}

// normalizeSecret folds a desired Secret's stringData into data, as the API
// server does when it stores it: stringData is write-only, so a live Secret
// never shows it, and comparing it would report every such Secret modified.
func normalizeSecret(obj map[string]interface{}) {
	if obj["kind"] != "Secret" {
		return
	}
	sd, ok := obj["stringData"].(map[string]interface{})
	if !ok {
		return
	}
	data, _ := obj["data"].(map[string]interface{})
	if data == nil {
		data = map[string]interface{}{}
	}
	for k, v := range sd {
		if s, ok := v.(string); ok {
			data[k] = base64.StdEncoding.EncodeToString([]byte(s))
		}
	}
	obj["data"] = data
	delete(obj, "stringData")
}

// patchMatches tells whether a compare patch is about the object: every
// field it sets matches.
func patchMatches(p fleet.ComparePatch, o *unstructured.Unstructured) bool {
	return (p.Kind == "" || p.Kind == o.GetKind()) &&
		(p.APIVersion == "" || p.APIVersion == o.GetAPIVersion()) &&
		(p.Name == "" || p.Name == o.GetName()) &&
		(p.Namespace == "" || p.Namespace == o.GetNamespace())
}

// OpIgnore is the comparePatches operation that leaves a whole object out
// of the modified check, as in Fleet ({"op": "ignore"}): e.g. a Job a chart
// creates that deletes itself once complete.
const OpIgnore = "ignore"

// Ignored says whether a comparePatch matching the desired object has the
// ignore operation: the object then never counts as modified or missing.
func Ignored(desired *unstructured.Unstructured, patches []fleet.ComparePatch) bool {
	for _, p := range patches {
		if !patchMatches(p, desired) {
			continue
		}
		for _, op := range p.Operations {
			if op.Op == OpIgnore {
				return true
			}
		}
	}
	return false
}

// quantityFields hold resource quantities, which the API server normalizes
// ("0.5" becomes "500m").
var quantityFields = map[string]bool{"resources": true, "limits": true, "requests": true, "capacity": true, "hard": true}

// subsetDiff compares desired with live where desired sets something. It
// returns the merge patch of desired's values where they differ.
// quantities tells that the values below are resource quantities.
func subsetDiff(desired, live interface{}, quantities bool) (interface{}, bool) {
	switch dv := desired.(type) {
	case nil:
		return nil, false
	case map[string]interface{}:
		lv, ok := live.(map[string]interface{})
		if !ok {
			if len(dv) == 0 && live == nil {
				return nil, false
			}
			return dv, true
		}
		out := map[string]interface{}{}
		for k, v := range dv {
			if p, differs := subsetDiff(v, lv[k], quantities || quantityFields[k]); differs {
				out[k] = p
			}
		}
		return out, len(out) > 0
	case []interface{}:
		lv, ok := live.([]interface{})
		if !ok {
			if len(dv) == 0 && live == nil {
				return nil, false
			}
			return dv, true
		}
		if len(lv) != len(dv) {
			return dv, true
		}
		for i := range dv {
			if _, differs := subsetDiff(dv[i], lv[i], quantities); differs {
				return dv, true
			}
		}
		return nil, false
	default:
		if scalarEqual(dv, live, quantities) {
			return nil, false
		}
		return dv, true
	}
}

// scalarEqual compares leaf values: numbers by value, quantities ("500m"
// and 0.5) by amount, and a zero value with an absent one.
func scalarEqual(d, l interface{}, quantities bool) bool {
	if l == nil {
		return isZero(d)
	}
	if df, ok := number(d); ok {
		if lf, ok := number(l); ok {
			return df == lf
		}
	}
	if d == l {
		return true
	}
	if !quantities {
		return false
	}
	dq, err1 := resource.ParseQuantity(fmt.Sprint(d))
	lq, err2 := resource.ParseQuantity(fmt.Sprint(l))
	return err1 == nil && err2 == nil && dq.Cmp(lq) == 0
}

func number(v interface{}) (float64, bool) {
	switch n := v.(type) {
	case int64:
		return float64(n), true
	case int:
		return float64(n), true
	case int32:
		return float64(n), true
	case float64:
		return n, !math.IsNaN(n)
	case json.Number:
		f, err := n.Float64()
		return f, err == nil
	}
	return 0, false
}

func isZero(v interface{}) bool {
	switch x := v.(type) {
	case bool:
		return !x
	case string:
		return x == ""
	}
	if f, ok := number(v); ok {
		return f == 0
	}
	return false
}
