package bundlereader

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// ignoredField is a field Fleet's fleet.yaml knows that this manager reads
// (so that its value is checked as Fleet checks it) and then ignores.
type ignoredField struct {
	// shape is the Go type of the value as Fleet declares it, for fields no
	// type of this module has; nil when the struct has the field.
	shape reflect.Type
	// why ends the warning: what ignoring it means for the user.
	why string
}

// ignoredFields are, per struct type of the fleet.yaml schema (inline
// embedded types included), the Fleet fields that parse but are not
// implemented. Implementing one means deleting its line here.
var ignoredFields = map[reflect.Type]map[string]ignoredField{
	reflect.TypeOf(FleetYAML{}): {
		"imageScans": {shape: reflect.TypeOf([]imageScanYAML{}),
			why: "no image is scanned and no tag is written back to the repository"},
		"targetRestrictions": {shape: reflect.TypeOf([]fleet.BundleTargetRestriction{}),
			why: "target restrictions are taken from the GitRepo's targets only"},
		"resources": {shape: reflect.TypeOf([]fleet.BundleResource{}),
			why: "a bundle's resources are the files of its directory"},
		"contentsId": {shape: reflect.TypeOf(""), why: "it is set by Fleet itself, not by fleet.yaml"},
		"valuesHash": {shape: reflect.TypeOf(""), why: "it is set by Fleet itself, not by fleet.yaml"},
	},
}

// imageScanYAML is one entry of Fleet's fleet.yaml imageScans, only to check
// its shape: Fleet's ImageScanYAML with its ImageScanSpec inline.
type imageScanYAML struct {
	Name        string                       `json:"name,omitempty"`
	TagName     string                       `json:"tagName,omitempty"`
	GitRepoName string                       `json:"gitrepoName,omitempty"`
	Image       string                       `json:"image,omitempty"`
	Interval    metav1.Duration              `json:"interval,omitempty"`
	SecretRef   *corev1.LocalObjectReference `json:"secretRef,omitempty"`
	Suspend     bool                         `json:"suspend,omitempty"`
	Policy      struct {
		SemVer *struct {
			Range string `json:"range"`
		} `json:"semver,omitempty"`
		Alphabetical *struct {
			Order string `json:"order,omitempty"`
		} `json:"alphabetical,omitempty"`
	} `json:"policy"`
}

// fieldChecker walks a fleet.yaml against the Go type it decodes into and
// collects Warnings for the keys that are ignored.
type fieldChecker struct {
	found []Warning
	seen  map[Warning]bool // an alias visits its anchor's keys again
	// active are the nodes being checked, each against a type: a mapping
	// that merges itself, or a list that holds itself, is not walked again.
	active map[visit]bool
}

type visit struct {
	n *yamlv3.Node
	t reflect.Type
}

func (c *fieldChecker) warnf(line int, format string, args ...any) {
	w := Warning{Line: line, Message: fmt.Sprintf(format, args...)}
	if !c.seen[w] {
		c.seen[w] = true
		c.found = append(c.found, w)
	}
}

var jsonUnmarshaler = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()

// check walks the YAML node n against the Go type t (at path, for messages).
// A key no field of t takes gives a Warning, as does a field listed in
// ignoredFields; the value of an ignored Fleet field is still checked
// against its shape, since Fleet would refuse a wrong one. Types that decode
// themselves (GenericMap, IntOrString) and free-form values are not looked
// into; type mismatches of fields t has are left to the JSON decoder.
func (c *fieldChecker) check(n *yamlv3.Node, t reflect.Type, path string) error {
	n = resolve(n)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return nil
	}
	v := visit{n, t}
	if c.active[v] {
		return nil
	}
	c.active[v] = true
	defer delete(c.active, v)
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yamlv3.MappingNode {
			return nil
		}
		fields := jsonFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" && k.Tag == "!!merge" {
				if err := c.checkMerge(v, t, path); err != nil {
					return err
				}
				continue
			}
			key := join(path, k.Value)
			ft, known := lookupField(fields, k.Value)
			if ig, ok := lookupIgnored(t, k.Value); ok {
				c.warnf(k.Line, "%s is not implemented here and is ignored: %s", key, ig.why)
				if !known {
					ft = ig.shape
					if err := checkShape(v, ft, key); err != nil {
						return err
					}
				}
			} else if !known {
				c.warnf(k.Line, "unknown field %q is ignored (a typo?)", key)
				continue
			}
			if err := c.check(v, ft, key); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yamlv3.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := c.check(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yamlv3.SequenceNode {
			return nil
		}
		for i, item := range n.Content {
			if err := c.check(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (c *fieldChecker) checkMerge(v *yamlv3.Node, t reflect.Type, path string) error {
	v = resolve(v)
	if v.Kind == yamlv3.SequenceNode {
		for _, item := range v.Content {
			if err := c.check(item, t, path); err != nil {
				return err
			}
		}
		return nil
	}
	return c.check(v, t, path)
}

// lookupField finds the type of the field key takes: of that JSON name, or
// else of a name equal but for case, as Go's encoding/json (and so Fleet)
// matches keys.
func lookupField[V any](fields map[string]V, key string) (V, bool) {
	if v, ok := fields[key]; ok {
		return v, true
	}
	for name, v := range fields {
		if strings.EqualFold(name, key) {
			return v, true
		}
	}
	var zero V
	return zero, false
}

// lookupIgnored finds key in ignoredFields for the struct t or a struct it
// embeds inline.
func lookupIgnored(t reflect.Type, key string) (ignoredField, bool) {
	if ig, ok := lookupField(ignoredFields[t], key); ok {
		return ig, true
	}
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.Anonymous || f.Type.Kind() != reflect.Struct {
			continue
		}
		if name, _, _ := strings.Cut(f.Tag.Get("json"), ","); name != "" {
			continue
		}
		if ig, ok := lookupIgnored(f.Type, key); ok {
			return ig, true
		}
	}
	return ignoredField{}, false
}

// checkShape decodes the value n of an ignored Fleet field into its shape,
// to refuse a value of the wrong type as Fleet does.
func checkShape(n *yamlv3.Node, shape reflect.Type, key string) error {
	var v any
	if err := resolve(n).Decode(&v); err != nil {
		return nil //nolint:nilerr // e.g. an alias that contains itself: nothing to check
	}
	j, err := json.Marshal(v)
	if err != nil {
		return nil //nolint:nilerr // keys that are not strings: Fleet's decoder refuses them elsewhere
	}
	return unmarshalJSON(j, n, reflect.New(shape).Interface(), key)
}
