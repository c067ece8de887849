package bundlereader

import (
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"unicode"

	yamlv3 "go.yaml.in/yaml/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// Warning is something in a fleet.yaml that is ignored rather than refused,
// as Fleet ignores it: a key no Fleet version knows (often a typo), or a
// Fleet field this manager does not implement. Fleet users' repositories
// must keep working, so these never fail a bundle; they are shown instead
// (on the GitRepo's status, on `fleet apply`'s standard error).
type Warning struct {
	// File is the fleet.yaml, relative to the repository root.
	File string
	// Line is the line of the key in File, 0 when not known.
	Line int
	// Message says what is ignored and why.
	Message string
}

// String is "file: line N: message", as errors name places in fleet.yaml.
func (w Warning) String() string {
	if w.Line > 0 {
		return fmt.Sprintf("%s: line %d: %s", w.File, w.Line, w.Message)
	}
	return fmt.Sprintf("%s: %s", w.File, w.Message)
}

// ParseFleetYAML parses the bytes of a fleet.yaml leniently, as Fleet reads
// it: a key that no field takes is ignored with a Warning, and so is a Fleet
// field that is not implemented here. Malformed YAML, values of the wrong
// type, invalid label selectors and other values Fleet would refuse are
// errors that name file and, where it can be told, the line. Empty input is
// an empty FleetYAML.
func ParseFleetYAML(data []byte, file string) (*FleetYAML, []Warning, error) {
	fy := &FleetYAML{}
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(data, &doc); err != nil {
		return nil, nil, fmt.Errorf("%s: invalid YAML: %s", file, strings.TrimPrefix(err.Error(), "yaml: "))
	}
	if doc.Kind == 0 {
		return fy, nil, nil // empty file or only comments
	}
	root := resolve(&doc)
	if root.Kind == yamlv3.ScalarNode && root.Tag == "!!null" {
		return fy, nil, nil
	}
	if root.Kind != yamlv3.MappingNode {
		return nil, nil, fmt.Errorf("%s: line %d: expected a mapping of fleet.yaml fields, got %s", file, root.Line, kindName(root))
	}
	c := &fieldChecker{seen: map[Warning]bool{}, active: map[visit]bool{}}
	err := checkDuplicates(root, map[*yamlv3.Node]bool{})
	if err == nil {
		err = c.check(root, reflect.TypeOf(fy).Elem(), "")
	}
	if err == nil {
		err = decodeJSON(data, root, fy)
	}
	if err == nil {
		err = fy.validate(root)
	}
	if err != nil {
		var fe *fieldError
		if errors.As(err, &fe) {
			return nil, nil, fmt.Errorf("%s: line %d: %s", file, fe.line, fe.msg)
		}
		return nil, nil, fmt.Errorf("%s: %w", file, err)
	}
	for i := range c.found {
		c.found[i].File = file
	}
	return fy, c.found, nil
}

// decodeJSON decodes the YAML data of node n into v through JSON, as the
// API server and Fleet read it, naming the field and line of a value of the
// wrong type.
func decodeJSON(data []byte, n *yamlv3.Node, v any) error {
	j, err := yaml.YAMLToJSON(data)
	if err != nil {
		return fmt.Errorf("invalid YAML: %w", err)
	}
	return unmarshalJSON(j, n, v, "")
}

// unmarshalJSON decodes the JSON j of node n into v, naming the field (below
// prefix) and line of a value of the wrong type.
func unmarshalJSON(j []byte, n *yamlv3.Node, v any, prefix string) error {
	err := json.Unmarshal(j, v)
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
		return nil
	case errors.As(err, &te):
		field := jsonPath(te.Field)
		name := strings.Join(field, ".")
		if prefix != "" {
			name = strings.Join(append([]string{prefix}, field...), ".")
		}
		msg := fmt.Sprintf("field %s: cannot use a %s as %s", name, te.Value, typeName(te.Type))
		if line := findLine(n, field); line > 0 {
			return &fieldError{line: line, msg: msg}
		}
		return errors.New(msg)
	case prefix != "":
		return &fieldError{line: resolve(n).Line, msg: fmt.Sprintf("field %s: %v", prefix, err)}
	}
	return err
}

// validate checks what Fleet or the API server would reject later with a
// less helpful message, naming the line where it can.
func (fy *FleetYAML) validate(root *yamlv3.Node) error {
	switch fy.TargetCustomizationMode {
	case "", fleet.FirstMatch, fleet.AllMatches:
	default:
		return &fieldError{line: lineAt(root, "targetCustomizationMode"),
			msg: fmt.Sprintf("targetCustomizationMode %q: must be %s or %s", fy.TargetCustomizationMode, fleet.FirstMatch, fleet.AllMatches)}
	}
	if fy.Helm != nil && len(fy.Helm.ReleaseName) > 53 {
		return &fieldError{line: lineAt(root, "helm", "releaseName"),
			msg: fmt.Sprintf("helm.releaseName %q is longer than 53 characters", fy.Helm.ReleaseName)}
	}
	for i, t := range fy.TargetCustomizations {
		if t.Helm != nil && len(t.Helm.ReleaseName) > 53 {
			return &fieldError{line: lineAt(root, "targetCustomizations", i, "helm", "releaseName"),
				msg: fmt.Sprintf("targetCustomizations[%d].helm.releaseName %q is longer than 53 characters", i, t.Helm.ReleaseName)}
		}
	}
	if err := fy.validateReserved(root); err != nil {
		return err
	}
	for _, s := range fy.selectors() {
		if s.sel == nil {
			continue
		}
		if _, err := metav1.LabelSelectorAsSelector(s.sel); err != nil {
			return &fieldError{line: lineAt(root, s.path...), msg: fmt.Sprintf("%s is not a valid label selector: %v", pathString(s.path), err)}
		}
	}
	for i, d := range fy.DependsOn {
		if d.Name == "" && d.Selector == nil {
			return &fieldError{line: lineAt(root, "dependsOn", i), msg: fmt.Sprintf("dependsOn[%d] must set name or selector", i)}
		}
		for j, st := range d.AcceptedStates {
			if !validStates[st] {
				return &fieldError{line: lineAt(root, "dependsOn", i, "acceptedStates", j),
					msg: fmt.Sprintf("dependsOn[%d].acceptedStates[%d] %q is not a bundle state: use Ready, NotReady, WaitApplied, ErrApplied, OutOfSync, Pending or Modified", i, j, st)}
			}
		}
	}
	return nil
}

var validStates = map[fleet.BundleState]bool{
	fleet.Ready: true, fleet.NotReady: true, fleet.WaitApplied: true, fleet.ErrApplied: true,
	fleet.OutOfSync: true, fleet.Pending: true, fleet.Modified: true,
}

// pathSelector is a label selector of fleet.yaml and where it is.
type pathSelector struct {
	path []any // keys (string) and list indices (int)
	sel  *metav1.LabelSelector
}

// selectors lists every label selector of the file: a selector that does
// not parse would match nothing, silently, so it is refused here as Fleet's
// targeting refuses it.
func (fy *FleetYAML) selectors() []pathSelector {
	var out []pathSelector
	for _, list := range []struct {
		key     string
		targets []fleet.BundleTarget
	}{{"targetCustomizations", fy.TargetCustomizations}, {"targets", fy.Targets}} {
		for i, t := range list.targets {
			out = append(out,
				pathSelector{[]any{list.key, i, "clusterSelector"}, t.ClusterSelector},
				pathSelector{[]any{list.key, i, "clusterGroupSelector"}, t.ClusterGroupSelector})
		}
	}
	for i, t := range fy.OverrideTargets {
		out = append(out,
			pathSelector{[]any{"overrideTargets", i, "clusterSelector"}, t.ClusterSelector},
			pathSelector{[]any{"overrideTargets", i, "clusterGroupSelector"}, t.ClusterGroupSelector})
	}
	for i, d := range fy.DependsOn {
		out = append(out, pathSelector{[]any{"dependsOn", i, "selector"}, d.Selector})
	}
	if fy.RolloutStrategy != nil {
		for i, p := range fy.RolloutStrategy.Partitions {
			out = append(out,
				pathSelector{[]any{"rolloutStrategy", "partitions", i, "clusterSelector"}, p.ClusterSelector},
				pathSelector{[]any{"rolloutStrategy", "partitions", i, "clusterGroupSelector"}, p.ClusterGroupSelector})
		}
	}
	return out
}

// pathString writes a path as targets[1].clusterSelector.
func pathString(path []any) string {
	var b strings.Builder
	for _, p := range path {
		switch v := p.(type) {
		case int:
			fmt.Fprintf(&b, "[%d]", v)
		default:
			if b.Len() > 0 {
				b.WriteByte('.')
			}
			fmt.Fprint(&b, v)
		}
	}
	return b.String()
}

// lineAt returns the line of the mapping key or list item at path (keys as
// strings, list indices as ints), looking through aliases and merge keys,
// or the line of the deepest part of it that exists.
func lineAt(n *yamlv3.Node, path ...any) int {
	line := 0
	for _, p := range path {
		n = resolve(n)
		if n == nil {
			break
		}
		switch v := p.(type) {
		case int:
			if n.Kind != yamlv3.SequenceNode || v >= len(n.Content) {
				return line
			}
			n = n.Content[v]
			line = resolve(n).Line
		case string:
			k, val := mappingEntry(n, v, map[*yamlv3.Node]bool{})
			if k == nil {
				return line
			}
			line, n = k.Line, val
		}
	}
	return line
}

// mappingEntry finds key in the mapping n, or in what its merge keys bring
// (seen guards against a mapping that merges itself).
func mappingEntry(n *yamlv3.Node, key string, seen map[*yamlv3.Node]bool) (*yamlv3.Node, *yamlv3.Node) {
	if n == nil || n.Kind != yamlv3.MappingNode || seen[n] {
		return nil, nil
	}
	seen[n] = true
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key && n.Content[i].Tag != "!!merge" {
			return n.Content[i], n.Content[i+1]
		}
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Tag != "!!merge" {
			continue
		}
		v := resolve(n.Content[i+1])
		srcs := []*yamlv3.Node{v}
		if v.Kind == yamlv3.SequenceNode {
			srcs = v.Content
		}
		for _, src := range srcs {
			if k, val := mappingEntry(resolve(src), key, seen); k != nil {
				return k, val
			}
		}
	}
	return nil, nil
}

// fieldError is an error at a known line of the YAML.
type fieldError struct {
	line int
	msg  string
}

func (e *fieldError) Error() string { return fmt.Sprintf("line %d: %s", e.line, e.msg) }

// jsonFields maps the JSON names of a struct's fields, those of inline
// embedded structs included, to their types.
func jsonFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
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
