package bundlereader

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode"

	yamlv3 "go.yaml.in/yaml/v3"
	"sigs.k8s.io/yaml"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// FleetYAML is the body of a fleet.yaml (or fleet.yml): the default
// deployment options of the bundle, inline, plus the fields that only make
// sense for a whole bundle.
type FleetYAML struct {
	// BundleDeploymentOptions are the bundle's default options.
	fleet.BundleDeploymentOptions `json:",inline"`

	// Name, when set, is the bundle's name instead of the one derived from
	// its path.
	Name string `json:"name,omitempty"`
	// Labels are added to the Bundle.
	Labels map[string]string `json:"labels,omitempty"`
	// Targets become the Bundle's first targets, before the
	// targetCustomizations: Fleet reads fleet.yaml into a BundleSpec, so its
	// targets key is taken too.
	Targets []fleet.BundleTarget `json:"targets,omitempty"`
	// TargetCustomizations become the Bundle's targets, before the GitRepo's.
	TargetCustomizations []fleet.BundleTarget `json:"targetCustomizations,omitempty"`
	// OverrideTargets, when the key is present, take the place of the
	// GitRepo's targets (and target restrictions) for this bundle.
	OverrideTargets []fleet.GitTarget `json:"overrideTargets,omitempty"`
	// DependsOn lists bundles that must be ready first.
	DependsOn []fleet.BundleRef `json:"dependsOn,omitempty"`
	// Paused stops new deployments of the bundle.
	Paused bool `json:"paused,omitempty"`
	// RolloutStrategy limits how fast a change reaches the clusters.
	RolloutStrategy *fleet.RolloutStrategy `json:"rolloutStrategy,omitempty"`
	// TargetCustomizationMode is FirstMatch (empty) or AllMatches.
	TargetCustomizationMode fleet.TargetCustomizationMode `json:"targetCustomizationMode,omitempty"`
}

// ParseFleetYAML parses the bytes of a fleet.yaml strictly: malformed YAML,
// unknown fields and values of the wrong type are errors that name file and,
// where it can be told, the line. Empty input is an empty FleetYAML.
func ParseFleetYAML(data []byte, file string) (*FleetYAML, error) {
	fy := &FleetYAML{}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s: invalid YAML: %s", file, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if doc.Kind == 0 {
		return fy, nil // empty file or only comments
	}
	root := resolve(&doc)
	if root.Kind == yamlv3.ScalarNode && root.Tag == "!!null" {
		return fy, nil
	}
	if root.Kind != yamlv3.MappingNode {
		return nil, fmt.Errorf("%s: line %d: expected a mapping of fleet.yaml fields, got %s", file, root.Line, kindName(root))
	}
	err := checkDuplicates(root, map[*yamlv3.Node]bool{})
	if err == nil {
		err = checkFields(root, reflect.TypeOf(fy).Elem(), "")
	}
	if err != nil {
		var fe *fieldError
		if errors.As(err, &fe) {
			return nil, fmt.Errorf("%s: line %d: %s", file, fe.line, fe.msg)
		}
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return nil, fmt.Errorf("%s: invalid YAML: %w", file, err)
	}
	if err := json.Unmarshal(j, fy); err != nil {
		var te *json.UnmarshalTypeError
		if errors.As(err, &te) && te.Field != "" {
			field := jsonPath(te.Field)
			msg := fmt.Sprintf("field %s: cannot use a %s as %s", strings.Join(field, "."), te.Value, typeName(te.Type))
			if line := findLine(root, field); line > 0 {
				return nil, fmt.Errorf("%s: line %d: %s", file, line, msg)
			}
			return nil, fmt.Errorf("%s: %s", file, msg)
		}
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	if err := fy.validate(); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return fy, nil
}

// validate checks what the API server would reject later with a less
// helpful message.
func (fy *FleetYAML) validate() error {
	switch fy.TargetCustomizationMode {
	case "", fleet.FirstMatch, fleet.AllMatches:
	default:
		return fmt.Errorf("targetCustomizationMode %q: must be %s or %s", fy.TargetCustomizationMode, fleet.FirstMatch, fleet.AllMatches)
	}
	if fy.Helm != nil && len(fy.Helm.ReleaseName) > 53 {
		return fmt.Errorf("helm.releaseName %q is longer than 53 characters", fy.Helm.ReleaseName)
	}
	for i, t := range fy.TargetCustomizations {
		if t.Helm != nil && len(t.Helm.ReleaseName) > 53 {
			return fmt.Errorf("targetCustomizations[%d].helm.releaseName %q is longer than 53 characters", i, t.Helm.ReleaseName)
		}
	}
	return nil
}

// fieldError is an error at a known line of the YAML.
type fieldError struct {
	line int
	msg  string
}

func (e *fieldError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

var jsonUnmarshaler = reflect.TypeOf((*json.Unmarshaler)(nil)).Elem()

// checkFields walks a YAML node against the Go type it will be decoded into
// and reports the first mapping key that no field of that type takes. Types
// that decode themselves (GenericMap, IntOrString) and free-form values are
// not looked into. Type mismatches are left to the JSON decoder.
func checkFields(n *yamlv3.Node, t reflect.Type, path string) error {
	n = resolve(n)
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(jsonUnmarshaler) {
		return nil
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yamlv3.MappingNode {
			return nil
		}
		fields := jsonFields(t)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" && k.Tag == "!!merge" {
				if err := checkMerge(v, t, path); err != nil {
					return err
				}
				continue
			}
			ft, ok := fields[k.Value]
			if !ok {
				return &fieldError{line: k.Line, msg: fmt.Sprintf("unknown field %q", join(path, k.Value))}
			}
			if err := checkFields(v, ft, join(path, k.Value)); err != nil {
				return err
			}
		}
	case reflect.Map:
		if n.Kind != yamlv3.MappingNode {
			return nil
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			if err := checkFields(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value)); err != nil {
				return err
			}
		}
	case reflect.Slice, reflect.Array:
		if n.Kind != yamlv3.SequenceNode {
			return nil
		}
		for i, item := range n.Content {
			if err := checkFields(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
	}
	return nil
}

func checkMerge(v *yamlv3.Node, t reflect.Type, path string) error {
	v = resolve(v)
	if v.Kind == yamlv3.SequenceNode {
		for _, item := range v.Content {
			if err := checkFields(item, t, path); err != nil {
				return err
			}
		}
		return nil
	}
	return checkFields(v, t, path)
}

// jsonFields maps the JSON names of a struct's fields, those of inline
// embedded structs included, to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			et := f.Type
			if et.Kind() == reflect.Pointer {
				et = et.Elem()
			}
			if et.Kind() == reflect.Struct {
				for k, v := range jsonFields(et) {
					if _, taken := out[k]; !taken {
						out[k] = v
					}
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out[name] = f.Type
	}
	return out
}

// jsonPath splits the field path of a JSON decoding error, leaving out the
// Go names of embedded structs (JSON names here are lowerCamelCase).
func jsonPath(field string) []string {
	var out []string
	for _, p := range strings.Split(field, ".") {
		if p != "" && !unicode.IsUpper(rune(p[0])) {
			out = append(out, p)
		}
	}
	return out
}

// checkDuplicates reports a mapping key given twice anywhere, which the YAML
// to JSON conversion would otherwise silently garble.
func checkDuplicates(n *yamlv3.Node, seen map[*yamlv3.Node]bool) error {
	n = resolve(n)
	if n == nil || seen[n] {
		return nil
	}
	seen[n] = true
	if n.Kind == yamlv3.MappingNode {
		lines := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Value == "<<" && k.Tag == "!!merge" {
				continue
			}
			if first, dup := lines[k.Value]; dup {
				return &fieldError{line: k.Line, msg: fmt.Sprintf("key %q is given twice (first at line %d)", k.Value, first)}
			}
			lines[k.Value] = k.Line
		}
	}
	for _, c := range n.Content {
		if err := checkDuplicates(c, seen); err != nil {
			return err
		}
	}
	return nil
}

// findLine returns the line of the mapping key at a dotted JSON path,
// searching through sequences, or 0.
func findLine(n *yamlv3.Node, path []string) int {
	n = resolve(n)
	if len(path) == 0 {
		return n.Line
	}
	switch n.Kind {
	case yamlv3.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == path[0] {
				if len(path) == 1 {
					return n.Content[i].Line
				}
				return findLine(n.Content[i+1], path[1:])
			}
		}
	case yamlv3.SequenceNode:
		for _, item := range n.Content {
			if l := findLine(item, path); l > 0 {
				return l
			}
		}
	}
	return 0
}

func resolve(n *yamlv3.Node) *yamlv3.Node {
	for n != nil && (n.Kind == yamlv3.DocumentNode || n.Kind == yamlv3.AliasNode) {
		if n.Kind == yamlv3.AliasNode {
			n = n.Alias
			continue
		}
		if len(n.Content) == 0 {
			return n
		}
		n = n.Content[0]
	}
	return n
}

func kindName(n *yamlv3.Node) string {
	switch n.Kind {
	case yamlv3.SequenceNode:
		return "a list"
	case yamlv3.ScalarNode:
		return fmt.Sprintf("the value %q", n.Value)
	default:
		return "something else"
	}
}

func typeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Bool:
		return "a boolean"
	case reflect.Int, reflect.Int32, reflect.Int64, reflect.Uint, reflect.Uint32, reflect.Uint64:
		return "an integer"
	case reflect.String:
		return "a string"
	case reflect.Slice, reflect.Array:
		return "a list"
	case reflect.Map, reflect.Struct:
		return "a mapping"
	}
	return t.String()
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
