package target

import (
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// TemplateContext is what Helm values templates see, under Fleet's names:
// .ClusterName, .ClusterNamespace, .ClusterLabels, .ClusterAnnotations and
// .ClusterValues (the Cluster's spec.templateValues).
type TemplateContext struct {
	// ClusterName is the Cluster's name.
	ClusterName string
	// ClusterNamespace is the Cluster's namespace (its workspace), not its
	// cluster namespace.
	ClusterNamespace string
	// ClusterLabels are the Cluster's labels.
	ClusterLabels map[string]string
	// ClusterAnnotations are the Cluster's annotations.
	ClusterAnnotations map[string]string
	// ClusterValues are the Cluster's spec.templateValues.
	ClusterValues map[string]interface{}
}

// TemplateContextFor is the TemplateContext of cluster.
func TemplateContextFor(cluster *fleet.Cluster) TemplateContext {
	c := TemplateContext{
		ClusterName:        cluster.Name,
		ClusterNamespace:   cluster.Namespace,
		ClusterLabels:      cluster.Labels,
		ClusterAnnotations: cluster.Annotations,
	}
	if cluster.Spec.TemplateValues != nil {
		c.ClusterValues = cluster.Spec.TemplateValues.Data
	}
	return c
}

const (
	leftDelim  = "${"
	rightDelim = "}"
	// captureFunc is appended to a lone action's pipeline to get its value
	// with its type; the leading underscores keep it out of users' way.
	captureFunc = "__fleetCapture"
	// rangeFunc is appended to the pipeline of every range to count its
	// iterations against the budget before the loop starts.
	rangeFunc = "__fleetRange"
)

// Bounds of one ProcessTemplateValues call, over all its templates: values
// come from git, and a template such as ${ range 100000000000 } must fail at
// once rather than occupy the manager.
const (
	// MaxTemplateIterations is the most iterations all ranges may take.
	MaxTemplateIterations = 100000
	// MaxTemplateOutput is the most bytes all templates may print.
	MaxTemplateOutput = 1 << 20
	// maxPrintfWidth bounds the width and precision of printf verbs, which
	// would otherwise make a huge string in one call.
	maxPrintfWidth = 1000
)

// budget is what is left of the bounds of one ProcessTemplateValues call.
type budget struct {
	iterations int
	output     int
}

func newBudget() *budget {
	return &budget{iterations: MaxTemplateIterations, output: MaxTemplateOutput}
}

// take counts n bytes printed against the output bound.
func (b *budget) take(n int) error {
	b.output -= n
	if b.output < 0 {
		return fmt.Errorf("templates print more than %d bytes: make the values smaller", MaxTemplateOutput)
	}
	return nil
}

// limitedWriter writes into a strings.Builder while the budget lasts.
type limitedWriter struct {
	sb *strings.Builder
	b  *budget
}

func (w limitedWriter) Write(p []byte) (int, error) {
	if err := w.b.take(len(p)); err != nil {
		return 0, err
	}
	return w.sb.Write(p)
}

// rangeCheck counts the iterations of a range over v against the budget.
func (b *budget) rangeCheck(v interface{}) (interface{}, error) {
	n := 0
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n = int(min(max(rv.Int(), 0), MaxTemplateIterations+1))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		n = int(min(rv.Uint(), MaxTemplateIterations+1))
	case reflect.Slice, reflect.Array, reflect.Map, reflect.String:
		n = rv.Len()
	case reflect.Invalid:
	default:
		return nil, fmt.Errorf("range over %s is not allowed: range over a number, list or map", rv.Kind())
	}
	b.iterations -= n
	if b.iterations < 0 {
		return nil, fmt.Errorf("templates iterate more than %d times: use smaller ranges", MaxTemplateIterations)
	}
	return v, nil
}

// boundedPrintf is printf with widths and precisions of at most
// maxPrintfWidth and no "*" (a width taken from the arguments).
func boundedPrintf(format string, args ...interface{}) (string, error) {
	digits := 0
	inVerb := false
	for _, c := range format {
		switch {
		case !inVerb:
			inVerb = c == '%'
		case c == '*':
			return "", fmt.Errorf("printf: widths from arguments (*) are not allowed")
		case c >= '0' && c <= '9':
			digits = digits*10 + int(c-'0')
			if digits > maxPrintfWidth {
				return "", fmt.Errorf("printf: widths and precisions above %d are not allowed", maxPrintfWidth)
			}
		case c == '.':
			digits = 0
		case strings.ContainsRune("+-# ", c):
		default:
			inVerb, digits = false, 0
		}
	}
	return fmt.Sprintf(format, args...), nil
}

// checkNodes rejects template calls (and so definitions, which only they
// could run): they would allow recursion.
func checkNodes(n parse.Node) error {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return nil
		}
		for _, c := range n.Nodes {
			if err := checkNodes(c); err != nil {
				return err
			}
		}
	case *parse.TemplateNode:
		return fmt.Errorf("template calls are not allowed in values")
	case *parse.IfNode:
		return checkBranch(&n.BranchNode)
	case *parse.WithNode:
		return checkBranch(&n.BranchNode)
	case *parse.RangeNode:
		return checkBranch(&n.BranchNode)
	}
	return nil
}

func checkBranch(b *parse.BranchNode) error {
	if err := checkNodes(b.List); err != nil {
		return err
	}
	return checkNodes(b.ElseList)
}

// boundRanges appends rangeFunc to the pipeline of every range in n.
func boundRanges(t *parse.Tree, n parse.Node) {
	switch n := n.(type) {
	case *parse.ListNode:
		if n == nil {
			return
		}
		for _, c := range n.Nodes {
			boundRanges(t, c)
		}
	case *parse.IfNode:
		boundRanges(t, n.List)
		boundRanges(t, n.ElseList)
	case *parse.WithNode:
		boundRanges(t, n.List)
		boundRanges(t, n.ElseList)
	case *parse.RangeNode:
		ident := parse.NewIdentifier(rangeFunc).SetTree(t).SetPos(n.Pos)
		n.Pipe.Cmds = append(n.Pipe.Cmds, &parse.CommandNode{NodeType: parse.NodeCommand, Pos: n.Pos, Args: []parse.Node{ident}})
		boundRanges(t, n.List)
		boundRanges(t, n.ElseList)
	}
}

// templateFuncs are the functions templates may call besides text/template's
// builtins; a small subset of sprig's, same semantics.
var templateFuncs = template.FuncMap{
	// default DEFAULT VALUE: VALUE unless it is empty (nil, zero, "", empty
	// map or list), else DEFAULT.
	"default": func(def interface{}, v ...interface{}) interface{} {
		if len(v) == 0 || isEmpty(v[0]) {
			return def
		}
		return v[0]
	},
	// quote VALUE: VALUE as a double-quoted Go string.
	"quote": func(v interface{}) string {
		if v == nil {
			return `""`
		}
		return strconv.Quote(fmt.Sprint(v))
	},
	"upper": strings.ToUpper,
	"lower": strings.ToLower,
}

// ProcessTemplateValues renders, for one cluster, the templates in Helm values:
// every string of values, map keys included and at any depth, that contains
// "${" is a Go text/template with delimiters "${" and "}". values is not
// changed; the result is a new map sharing nothing with values or c.
//
// Templates run with missingkey=error, so a missing label or value is an error
// that names the template and where it is in values. To fall back to a
// default, use index, which yields the zero value for a missing key:
// ${ index .ClusterLabels "env" | default "dev" }.
//
// Types are kept where a template is the whole string: a value that is exactly
// one action, such as "${ .ClusterValues.replicas }", becomes the action's
// value as it is (a number, bool, map or list), not its printed form; the
// action's pipeline is extended with a function that captures its result.
// Any other template (text around the action, several actions, if/range) and
// every key renders to a string.
//
// Besides text/template's builtins, templates may call default, quote, upper
// and lower (as in sprig). Values come from git, so templates are bounded:
// no template calls (no recursion), at most MaxTemplateIterations range
// iterations and MaxTemplateOutput bytes printed over the whole call, and
// printf widths of at most 1000. Honouring helm.disablePreProcess is the caller's
// job: do not call this when it is set.
func ProcessTemplateValues(values map[string]interface{}, c TemplateContext) (map[string]interface{}, error) {
	if values == nil {
		return nil, nil
	}
	data := map[string]interface{}{
		"ClusterName":        c.ClusterName,
		"ClusterNamespace":   c.ClusterNamespace,
		"ClusterLabels":      c.ClusterLabels,
		"ClusterAnnotations": c.ClusterAnnotations,
		"ClusterValues":      c.ClusterValues,
	}
	return processMap(values, &renderer{data: data, budget: newBudget()}, "")
}

// renderer renders the templates of one ProcessTemplateValues call.
type renderer struct {
	data   map[string]interface{}
	budget *budget
}

func processMap(m map[string]interface{}, data *renderer, path string) (map[string]interface{}, error) {
	out := make(map[string]interface{}, len(m))
	origin := make(map[string]string, len(m)) // rendered key -> key as written
	for k, v := range m {
		key := k
		if strings.Contains(k, leftDelim) {
			rendered, err := render(k, data, path, false)
			if err != nil {
				return nil, err
			}
			key = rendered.(string)
		}
		if other, dup := origin[key]; dup {
			return nil, fmt.Errorf("helm values %s: keys %q and %q both render to %q", pathOrRoot(path), other, k, key)
		}
		origin[key] = k
		nv, err := processValue(v, data, path+"."+key)
		if err != nil {
			return nil, err
		}
		out[key] = nv
	}
	return out, nil
}

func processValue(v interface{}, data *renderer, path string) (interface{}, error) {
	switch v := v.(type) {
	case string:
		if !strings.Contains(v, leftDelim) {
			return v, nil
		}
		return render(v, data, path, true)
	case map[string]interface{}:
		return processMap(v, data, path)
	case []interface{}:
		out := make([]interface{}, len(v))
		for i := range v {
			nv, err := processValue(v[i], data, fmt.Sprintf("%s[%d]", path, i))
			if err != nil {
				return nil, err
			}
			out[i] = nv
		}
		return out, nil
	default:
		return v, nil
	}
}

// render executes text as a template. With keepType, a text that is one lone
// action yields the action's value with its type.
func render(text string, rd *renderer, path string, keepType bool) (interface{}, error) {
	var captured interface{}
	t, err := template.New("values").
		Delims(leftDelim, rightDelim).
		Option("missingkey=error").
		Funcs(templateFuncs).
		Funcs(template.FuncMap{
			captureFunc: func(v interface{}) string { captured = v; return "" },
			rangeFunc:   rd.budget.rangeCheck,
			"printf":    boundedPrintf,
		}).
		Parse(text)
	if err == nil && len(t.Templates()) > 1 {
		err = fmt.Errorf("template definitions are not allowed in values")
	}
	if err == nil {
		err = checkNodes(t.Tree.Root)
	}
	if err != nil {
		return nil, fmt.Errorf("helm values %s: template %q: %w", pathOrRoot(path), text, err)
	}
	boundRanges(t.Tree, t.Tree.Root)
	lone := keepType && captureLoneAction(t)
	var sb strings.Builder
	if err := t.Execute(limitedWriter{sb: &sb, b: rd.budget}, rd.data); err != nil {
		return nil, fmt.Errorf("helm values %s: template %q: %w", pathOrRoot(path), text, err)
	}
	if !lone {
		return sb.String(), nil
	}
	return copyValue(captured), nil
}

// captureLoneAction appends captureFunc to the pipeline of t when t is exactly
// one action that prints its value, and reports whether it did.
func captureLoneAction(t *template.Template) bool {
	nodes := t.Tree.Root.Nodes
	if len(nodes) != 1 {
		return false
	}
	action, ok := nodes[0].(*parse.ActionNode)
	if !ok || len(action.Pipe.Decl) > 0 {
		return false
	}
	ident := parse.NewIdentifier(captureFunc).SetTree(t.Tree).SetPos(action.Pos)
	action.Pipe.Cmds = append(action.Pipe.Cmds, &parse.CommandNode{
		NodeType: parse.NodeCommand,
		Pos:      action.Pos,
		Args:     []parse.Node{ident},
	})
	return true
}

// copyValue deep-copies a captured value so the result does not share maps or
// lists with the TemplateContext; map[string]string (labels) becomes a values
// map.
func copyValue(v interface{}) interface{} {
	switch v := v.(type) {
	case map[string]interface{}:
		out := make(map[string]interface{}, len(v))
		for k, e := range v {
			out[k] = copyValue(e)
		}
		return out
	case map[string]string:
		out := make(map[string]interface{}, len(v))
		for k, e := range v {
			out[k] = e
		}
		return out
	case []interface{}:
		out := make([]interface{}, len(v))
		for i, e := range v {
			out[i] = copyValue(e)
		}
		return out
	default:
		return v
	}
}

func isEmpty(v interface{}) bool {
	if v == nil {
		return true
	}
	rv := reflect.ValueOf(v)
	switch rv.Kind() {
	case reflect.Map, reflect.Slice, reflect.Array, reflect.String:
		return rv.Len() == 0
	default:
		return rv.IsZero()
	}
}

func pathOrRoot(path string) string {
	if path == "" {
		return "."
	}
	return path
}
