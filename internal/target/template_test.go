package target

import (
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

var tplContext = TemplateContext{
	ClusterName:        "prod-1",
	ClusterNamespace:   "fleet-default",
	ClusterLabels:      map[string]string{"env": "prod", "region": "eu"},
	ClusterAnnotations: map[string]string{"owner": "ops"},
	ClusterValues: map[string]interface{}{
		"replicas": 3.0,
		"debug":    true,
		"image":    map[string]interface{}{"tag": "v2"},
		"zones":    []interface{}{"a", "b"},
	},
}

func TestProcessTemplateValues(t *testing.T) {
	tests := []struct {
		name   string
		values map[string]interface{}
		want   map[string]interface{}
	}{
		{
			name:   "no templates",
			values: map[string]interface{}{"a": "plain", "n": 1.0, "b": true, "nil": nil, "$": "$ {not}"},
			want:   map[string]interface{}{"a": "plain", "n": 1.0, "b": true, "nil": nil, "$": "$ {not}"},
		},
		{
			name: "cluster fields",
			values: map[string]interface{}{
				"name":  "${ .ClusterName }",
				"ns":    "${ .ClusterNamespace }",
				"env":   "${ .ClusterLabels.env }",
				"owner": "${ .ClusterAnnotations.owner }",
				"host":  "app.${ .ClusterLabels.region }.example.com",
			},
			want: map[string]interface{}{
				"name":  "prod-1",
				"ns":    "fleet-default",
				"env":   "prod",
				"owner": "ops",
				"host":  "app.eu.example.com",
			},
		},
		{
			name: "nested maps, lists and keys",
			values: map[string]interface{}{
				"${ .ClusterLabels.env }": map[string]interface{}{
					"list": []interface{}{"${ .ClusterName }", 1.0, map[string]interface{}{"r": "${ .ClusterLabels.region }"}},
				},
			},
			want: map[string]interface{}{
				"prod": map[string]interface{}{
					"list": []interface{}{"prod-1", 1.0, map[string]interface{}{"r": "eu"}},
				},
			},
		},
		{
			name: "a lone action keeps its type",
			values: map[string]interface{}{
				"replicas": "${ .ClusterValues.replicas }",
				"debug":    "${ .ClusterValues.debug }",
				"image":    "${ .ClusterValues.image }",
				"zones":    "${ .ClusterValues.zones }",
				"labels":   "${ .ClusterLabels }",
				"fallback": `${ index .ClusterValues "missing" | default 2 }`,
				"text":     "n=${ .ClusterValues.replicas }",
				"trimmed":  "${- .ClusterValues.debug -}",
			},
			want: map[string]interface{}{
				"replicas": 3.0,
				"debug":    true,
				"image":    map[string]interface{}{"tag": "v2"},
				"zones":    []interface{}{"a", "b"},
				"labels":   map[string]interface{}{"env": "prod", "region": "eu"},
				"fallback": 2,
				"text":     "n=3",
				"trimmed":  true,
			},
		},
		{
			name: "functions",
			values: map[string]interface{}{
				"upper":   "${ .ClusterLabels.env | upper }",
				"lower":   `${ "EU" | lower }`,
				"quote":   "${ .ClusterName | quote }",
				"default": `${ index .ClusterLabels "tier" | default "standard" }`,
				"set":     `${ index .ClusterLabels "env" | default "standard" }`,
				"if":      `${ if eq .ClusterLabels.env "prod" }big${ else }small${ end }`,
			},
			want: map[string]interface{}{
				"upper":   "PROD",
				"lower":   "eu",
				"quote":   `"prod-1"`,
				"default": "standard",
				"set":     "prod",
				"if":      "big",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ProcessTemplateValues(tt.values, tplContext)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}

func TestProcessTemplateValuesErrors(t *testing.T) {
	tests := []struct {
		name   string
		values map[string]interface{}
		err    []string
	}{
		{
			name:   "missing label",
			values: map[string]interface{}{"a": map[string]interface{}{"b": "${ .ClusterLabels.tier }"}},
			err:    []string{`helm values .a.b: template "${ .ClusterLabels.tier }"`, `map has no entry for key "tier"`},
		},
		{
			name:   "missing value",
			values: map[string]interface{}{"l": []interface{}{"${ .ClusterValues.nope }"}},
			err:    []string{`helm values .l[0]: template "${ .ClusterValues.nope }"`, `"nope"`},
		},
		{
			name:   "syntax",
			values: map[string]interface{}{"a": "${ .ClusterName "},
			err:    []string{`helm values .a: template "${ .ClusterName "`},
		},
		{
			name:   "unknown function",
			values: map[string]interface{}{"a": "${ .ClusterName | toYaml }"},
			err:    []string{`function "toYaml" not defined`},
		},
		{
			name:   "keys rendering alike",
			values: map[string]interface{}{"prod": 1.0, "${ .ClusterLabels.env }": 2.0},
			err:    []string{`both render to "prod"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := ProcessTemplateValues(tt.values, tplContext)
			g.Expect(err).To(HaveOccurred())
			for _, s := range tt.err {
				g.Expect(err.Error()).To(ContainSubstring(s))
			}
		})
	}
}

func TestProcessTemplateValuesCopies(t *testing.T) {
	g := NewWithT(t)
	values := map[string]interface{}{"image": "${ .ClusterValues.image }", "m": map[string]interface{}{"x": "${ .ClusterName }"}}
	got, err := ProcessTemplateValues(values, tplContext)
	g.Expect(err).NotTo(HaveOccurred())
	got["image"].(map[string]interface{})["tag"] = "changed"
	g.Expect(tplContext.ClusterValues["image"]).To(Equal(map[string]interface{}{"tag": "v2"}), "context unchanged")
	g.Expect(values["m"]).To(Equal(map[string]interface{}{"x": "${ .ClusterName }"}), "input unchanged")

	nilValues, err := ProcessTemplateValues(nil, tplContext)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nilValues).To(BeNil())
}

// The caller honours disablePreProcess: a matched Result says whether to
// template, and the values then go through ProcessTemplateValues or not.
func TestTemplateContextForAndDisablePreProcess(t *testing.T) {
	g := NewWithT(t)
	cluster := &fleet.Cluster{
		ObjectMeta: metav1.ObjectMeta{
			Name: "c1", Namespace: "fleet-default",
			Labels: map[string]string{"env": "dev"}, Annotations: map[string]string{"a": "b"},
		},
		Spec: fleet.ClusterSpec{TemplateValues: &fleet.GenericMap{Data: map[string]interface{}{"size": "s"}}},
	}
	ctx := TemplateContextFor(cluster)
	g.Expect(ctx).To(Equal(TemplateContext{
		ClusterName: "c1", ClusterNamespace: "fleet-default",
		ClusterLabels: map[string]string{"env": "dev"}, ClusterAnnotations: map[string]string{"a": "b"},
		ClusterValues: map[string]interface{}{"size": "s"},
	}))

	b := bundle(fleet.BundleTarget{Name: "all", ClusterSelector: &metav1.LabelSelector{}})
	b.Spec.Helm = &fleet.HelmOptions{
		DisablePreProcess: true,
		Values:            &fleet.GenericMap{Data: map[string]interface{}{"size": "${ .ClusterValues.size }"}},
	}
	cb, err := Compile(b)
	g.Expect(err).NotTo(HaveOccurred())
	r, ok := cb.Match(ClusterInfoFor(cluster, nil))
	g.Expect(ok).To(BeTrue())
	g.Expect(r.Options.Helm.DisablePreProcess).To(BeTrue())
	// Left as written, since the caller skips ProcessTemplateValues.
	g.Expect(r.Options.Helm.Values.Data["size"]).To(Equal("${ .ClusterValues.size }"))
}

// Templates come from git: none may occupy the manager, however written.
func TestTemplatesAreBounded(t *testing.T) {
	for name, tmpl := range map[string]string{
		"huge range":           "${ range 100000000000 }${ end }",
		"huge range, printing": "${ range $i := 100000000000 }${ $i }${ end }",
		"nested ranges":        "${ range 1000 }${ range 1000 }${ end }${ end }",
		"output":               "${ range 60000 }" + strings.Repeat("x", 100) + "${ end }",
		"printf width":         `${ printf "%0999999999d" 1 }`,
		"printf star":          `${ printf "%*d" 999999999 1 }`,
		"recursion":            `${ define "a" }${ template "a" . }${ template "a" . }${ end }${ template "a" . }`,
		"definition":           `${ define "a" }x${ end }y`,
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			start := time.Now()
			_, err := ProcessTemplateValues(map[string]interface{}{"v": tmpl}, TemplateContext{})
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(Or(ContainSubstring("not allowed"), ContainSubstring("more than")))
			g.Expect(time.Since(start)).To(BeNumerically("<", time.Second))
		})
	}
	// The budget is shared by every template of one call.
	values := map[string]interface{}{}
	for i := 0; i < 20; i++ {
		values[fmt.Sprintf("k%d", i)] = "${ range 10000 }${ end }"
	}
	_, err := ProcessTemplateValues(values, TemplateContext{})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("iterate more than")))

	// Ordinary templates still work.
	out, err := ProcessTemplateValues(map[string]interface{}{
		"r": `${ range $k, $v := .ClusterLabels }${ $k }=${ $v };${ end }`,
		"p": `${ printf "%05d-%.2f" 7 1.5 }`,
	}, TemplateContext{ClusterLabels: map[string]string{"a": "1"}})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(out).To(Equal(map[string]interface{}{"r": "a=1;", "p": "00007-1.50"}))
}
