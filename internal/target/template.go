package target

import (
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"text/template"

	"sigs.k8s.io/yaml"

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
	// ClusterLabels are the Cluster's labels, as Fleet shows them (see
	// TemplateContextFor).
	ClusterLabels map[string]string
	// ClusterAnnotations are the Cluster's annotations, as Fleet shows them.
	ClusterAnnotations map[string]string
	// ClusterValues are the Cluster's spec.templateValues.
	ClusterValues map[string]interface{}
}

// TemplateContextFor is the TemplateContext of cluster. As Fleet does, it
// leaves out labels and annotations of tools (those starting with
// kubectl.kubernetes.io/ or holding cattle.io/), but keeps the labels starting
// with fleet.cattle.io/ and management.cattle.io/, which Rancher users
// select on.
func TemplateContextFor(cluster *fleet.Cluster) TemplateContext {
	c := TemplateContext{
		ClusterName:        cluster.Name,
		ClusterNamespace:   cluster.Namespace,
		ClusterLabels:      exportable(cluster.Labels, true),
		ClusterAnnotations: exportable(cluster.Annotations, false),
	}
	if cluster.Spec.TemplateValues != nil {
		c.ClusterValues = cluster.Spec.TemplateValues.Data
	}
	return c
}

func exportable(in map[string]string, labels bool) map[string]string {
	out := make(map[string]string, len(in))
	for k, v := range in {
		keep := !strings.HasPrefix(k, "kubectl.kubernetes.io/") && !strings.Contains(k, "cattle.io/")
		if labels && (strings.HasPrefix(k, "fleet.cattle.io/") || strings.HasPrefix(k, "management.cattle.io/")) {
			keep = true
		}
		if keep {
			out[k] = v
		}
	}
	return out
}

// ClusterLabelPrefix starts a Helm value that Fleet replaces by a cluster's
// label: "global.fleet.clusterLabels.env" becomes the value of label env.
const ClusterLabelPrefix = "global.fleet.clusterLabels."

const (
	leftDelim  = "${"
	rightDelim = "}"
	// rangeFunc is appended to the pipeline of every range to count its
	// iterations against the budget before the loop starts; the leading
	// underscores keep it out of users' way.
	rangeFunc = "__fleetRange"
)

// DependsOnCluster tells whether Helm values computed from h differ from
// cluster to cluster: they hold a global.fleet.clusterLabels. value, or,
// unless disablePreProcess, ${ } templates or templateValues.
func DependsOnCluster(h *fleet.HelmOptions) bool {
	if h == nil {
		return false
	}
	if !h.DisablePreProcess && len(h.TemplateValues) > 0 {
		return true
	}
	if h.Values == nil || len(h.Values.Data) == 0 {
		return false
	}
	templated := false
	walkStrings(h.Values.Data, func(s string, inMap bool) {
		if (inMap && strings.HasPrefix(s, ClusterLabelPrefix)) || (!h.DisablePreProcess && strings.Contains(s, leftDelim)) {
			templated = true
		}
	})
	return templated
}

// walkStrings calls f with every string in v, map keys included; inMap says
// the string is the value of a map key.
func walkStrings(v interface{}, f func(s string, inMap bool)) {
	switch v := v.(type) {
	case map[string]interface{}:
		for k, e := range v {
			f(k, false)
			if s, ok := e.(string); ok {
				f(s, true)
			} else {
				walkStrings(e, f)
			}
		}
	case []interface{}:
		for _, e := range v {
			walkStrings(e, f)
		}
	case string:
		f(v, false)
	}
}

// RenderHelmValues returns the Helm values of h for one cluster, computed as
// Fleet computes them in its manager:
//
//  1. Every string value of a map in Values (at any depth, maps inside lists
//     included) that starts with "global.fleet.clusterLabels." becomes the
//     value of the cluster label named by the rest, or "" when the cluster
//     has no such label. This happens even with disablePreProcess.
//  2. Unless disablePreProcess, Values are rendered by ProcessTemplateValues.
//  3. Unless disablePreProcess, each TemplateValues entry is rendered as a
//     template, its output read as YAML, and the result set at the top level
//     of the values under the entry's key, replacing what was there.
//
// h and c are not changed; the result shares nothing with them. All
// templates of one call share one budget (see MaxTemplateIterations and the
// other bounds).
func RenderHelmValues(h *fleet.HelmOptions, c TemplateContext) (map[string]interface{}, error) {
	var values map[string]interface{}
	if h.Values != nil && h.Values.Data != nil {
		values = deepCopyMap(h.Values.Data)
	}
	if values != nil {
		replaceLabelValues(values, c.ClusterLabels)
	}
	if h.DisablePreProcess {
		return values, nil
	}
	r := newRenderer(c)
	if len(values) > 0 {
		var err error
		if values, err = r.renderValues(values); err != nil {
			return nil, err
		}
	}
	if len(h.TemplateValues) == 0 {
		return values, nil
	}
	if values == nil {
		values = map[string]interface{}{}
	}
	keys := make([]string, 0, len(h.TemplateValues))
	for k := range h.TemplateValues {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		text, err := r.render(h.TemplateValues[k])
		if err != nil {
			return nil, fmt.Errorf("helm templateValues %s: template %q: %w", k, h.TemplateValues[k], err)
		}
		var v interface{}
		if err := yaml.Unmarshal([]byte(text), &v); err != nil {
			return nil, fmt.Errorf("helm templateValues %s: the template renders %q, which is not YAML: %w", k, text, err)
		}
		values[k] = v
	}
	return values, nil
}

// replaceLabelValues does step 1 of RenderHelmValues in place, as Fleet does:
// only strings that are values of a map count (not items of a list).
func replaceLabelValues(m map[string]interface{}, labels map[string]string) {
	for k, v := range m {
		switch v := v.(type) {
		case string:
			if name, ok := strings.CutPrefix(v, ClusterLabelPrefix); ok {
				m[k] = labels[name]
			}
		case map[string]interface{}:
			replaceLabelValues(v, labels)
		case []interface{}:
			for _, e := range v {
				if em, ok := e.(map[string]interface{}); ok {
					replaceLabelValues(em, labels)
				}
			}
		}
	}
}

// ProcessTemplateValues renders, for one cluster, the ${ } templates in Helm
// values the way Fleet does: values are written as YAML, that text is one Go
// text/template with delimiters "${" and "}", and its output is read back as
// YAML. So a template's output is typed as YAML types it: "${ .ClusterValues.
// replicas }" gives a number, "${ if ... }true${ else }false${ end }" a bool,
// and "${ toJson .ClusterValues.tolerations }" a list. values is not changed;
// the result shares nothing with values or c.
//
// Templates run with missingkey=error, so a missing label or value is an error
// that names the line of the values YAML it is on. To fall back to a
// default, use index, which yields the zero value for a missing key:
// ${ index .ClusterLabels "env" | default "dev" }.
//
// Templates may call sprig's functions, as in Fleet, except those listed in
// refusedFuncs. Values come from git, so templates are bounded: no template
// calls (no recursion), at most MaxTemplateIterations range iterations and
// MaxTemplateOutput bytes printed, function arguments and results of at most
// MaxTemplateValue bytes and MaxTemplateWork bytes in all, printf widths of
// at most 1000. Honouring helm.disablePreProcess is the caller's job: do not
// call this when it is set (RenderHelmValues does not).
func ProcessTemplateValues(values map[string]interface{}, c TemplateContext) (map[string]interface{}, error) {
	if values == nil {
		return nil, nil
	}
	return newRenderer(c).renderValues(values)
}

// renderer renders the templates of one cluster's values, on one budget.
type renderer struct {
	data   map[string]interface{}
	budget *budget
	funcs  template.FuncMap
}

func newRenderer(c TemplateContext) *renderer {
	b := newBudget()
	funcs := guardFuncs(b)
	funcs[rangeFunc] = b.rangeCheck
	// A cluster without templateValues shows an empty map, as in Fleet:
	// ${ toJson .ClusterValues } is {}, not null.
	clusterValues := deepCopyMap(c.ClusterValues)
	if clusterValues == nil {
		clusterValues = map[string]interface{}{}
	}
	return &renderer{
		// Copies, since sprig's set and merge change dicts in place.
		data: map[string]interface{}{
			"ClusterName":        c.ClusterName,
			"ClusterNamespace":   c.ClusterNamespace,
			"ClusterLabels":      toDict(c.ClusterLabels),
			"ClusterAnnotations": toDict(c.ClusterAnnotations),
			"ClusterValues":      clusterValues,
		},
		budget: b,
		funcs:  funcs,
	}
}

// toDict makes labels a map sprig's dict functions (hasKey, get, ...) take.
func toDict(in map[string]string) map[string]interface{} {
	out := make(map[string]interface{}, len(in))
	for k, v := range in {
		out[k] = v
	}
	return out
}

var templateLine = regexp.MustCompile(`template: values:(\d+)`)

func (r *renderer) renderValues(values map[string]interface{}) (map[string]interface{}, error) {
	doc, err := yaml.Marshal(values)
	if err != nil {
		return nil, fmt.Errorf("helm values cannot be written as YAML: %w", err)
	}
	if !strings.Contains(string(doc), leftDelim) {
		return deepCopyMap(values), nil
	}
	text, err := r.render(string(doc))
	if err != nil {
		where := ""
		if m := templateLine.FindStringSubmatch(err.Error()); m != nil {
			if n, _ := strconv.Atoi(m[1]); n > 0 && n <= strings.Count(string(doc), "\n")+1 {
				where = fmt.Sprintf(", line %d %q", n, strings.TrimSpace(strings.Split(string(doc), "\n")[n-1]))
			}
		}
		return nil, fmt.Errorf("helm values%s: %w", where, err)
	}
	out := map[string]interface{}{}
	if err := yaml.Unmarshal([]byte(text), &out); err != nil {
		return nil, fmt.Errorf("helm values render to invalid YAML (a template printed YAML syntax?): %w", err)
	}
	return out, nil
}

// render executes text as a template on the renderer's data and budget.
func (r *renderer) render(text string) (string, error) {
	t, err := template.New("values").
		Delims(leftDelim, rightDelim).
		Option("missingkey=error").
		Funcs(r.funcs).
		Parse(text)
	if err == nil && len(t.Templates()) > 1 {
		err = fmt.Errorf("template definitions are not allowed in values")
	}
	if err == nil {
		err = checkNodes(t.Root)
	}
	if err == nil {
		err = checkRefused(t.Root)
	}
	if err != nil {
		return "", err
	}
	boundRanges(t.Tree, t.Root)
	var sb strings.Builder
	if err := t.Execute(limitedWriter{sb: &sb, b: r.budget}, r.data); err != nil {
		return "", err
	}
	return sb.String(), nil
}

// deepCopyMap copies Helm values (maps, lists and scalars, as decoded from
// JSON or YAML).
func deepCopyMap(m map[string]interface{}) map[string]interface{} {
	if m == nil {
		return nil
	}
	return deepCopyValue(m).(map[string]interface{})
}

func deepCopyValue(v interface{}) interface{} {
	switch v := v.(type) {
	case map[string]interface{}:
		out := make(map[string]interface{}, len(v))
		for k, e := range v {
			out[k] = deepCopyValue(e)
		}
		return out
	case []interface{}:
		out := make([]interface{}, len(v))
		for i, e := range v {
			out[i] = deepCopyValue(e)
		}
		return out
	default:
		return v
	}
}
