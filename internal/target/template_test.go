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
	ClusterLabels:      map[string]string{"env": "prod", "region": "eu", "zip": "01234", "n": "12"},
	ClusterAnnotations: map[string]string{"owner": "ops"},
	ClusterValues: map[string]interface{}{
		"replicas": 3.0,
		"debug":    true,
		"image":    map[string]interface{}{"tag": "v2"},
		"zones":    []interface{}{"a", "b"},
	},
}

// The expectations follow Fleet's manager (internal/cmd/controller/target,
// preprocessHelmValues): the values are written as YAML, templated as one
// text with ${ } delimiters and sprig's functions, and read back as YAML.
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
		{name: ".ClusterName", values: map[string]interface{}{"v": "${ .ClusterName }"}, want: map[string]interface{}{"v": "prod-1"}},
		{name: ".ClusterNamespace", values: map[string]interface{}{"v": "${ .ClusterNamespace }"}, want: map[string]interface{}{"v": "fleet-default"}},
		{name: ".ClusterLabels", values: map[string]interface{}{"v": "${ .ClusterLabels.env }"}, want: map[string]interface{}{"v": "prod"}},
		{name: ".ClusterAnnotations", values: map[string]interface{}{"v": "${ .ClusterAnnotations.owner }"}, want: map[string]interface{}{"v": "ops"}},
		{name: ".ClusterValues", values: map[string]interface{}{"v": "${ .ClusterValues.image.tag }"}, want: map[string]interface{}{"v": "v2"}},
		{
			name: "text around a template, nested maps, lists and keys",
			values: map[string]interface{}{
				"host": "app.${ .ClusterLabels.region }.example.com",
				"${ .ClusterLabels.env }": map[string]interface{}{
					"list": []interface{}{"${ .ClusterName }", 1.0, map[string]interface{}{"r": "${ .ClusterLabels.region }"}},
				},
			},
			want: map[string]interface{}{
				"host": "app.eu.example.com",
				"prod": map[string]interface{}{
					"list": []interface{}{"prod-1", 1.0, map[string]interface{}{"r": "eu"}},
				},
			},
		},
		{
			// What a template prints is read as YAML, as in Fleet: numbers,
			// bools and JSON become typed values, Go's printing of a map
			// stays a string.
			name: "output typed as YAML",
			values: map[string]interface{}{
				"replicas": "${ .ClusterValues.replicas }",
				"debug":    "${ .ClusterValues.debug }",
				"enabled":  `${ if eq .ClusterLabels.env "prod" }true${ else }false${ end }`,
				"n":        "${ .ClusterLabels.n }",
				"zip":      "${ .ClusterLabels.zip | quote }",
				"zones":    "${ toJson .ClusterValues.zones }",
				"image":    "${ .ClusterValues.image }",
				"fallback": `${ index .ClusterValues "missing" | default 2 }`,
				"text":     "n=${ .ClusterValues.replicas }",
			},
			want: map[string]interface{}{
				"replicas": 3.0,
				"debug":    true,
				"enabled":  true,
				"n":        12.0,
				"zip":      "01234",
				"zones":    []interface{}{"a", "b"},
				"image":    "map[tag:v2]",
				"fallback": 2.0,
				"text":     "n=3",
			},
		},
		{
			name: "sprig functions",
			values: map[string]interface{}{
				"upper":   "${ .ClusterLabels.env | upper }",
				"default": `${ index .ClusterLabels "tier" | default "standard" }`,
				"hasKey":  `${ hasKey .ClusterLabels "env" }`,
				"get":     `${ get .ClusterLabels "region" }`,
				"replace": `${ .ClusterName | replace "-" "_" }`,
				"trunc":   `${ .ClusterNamespace | trunc 5 }`,
				"b64enc":  `${ .ClusterName | b64enc }`,
				"sha":     `${ .ClusterName | sha256sum | trunc 8 }`,
				"ternary": `${ ternary "big" "small" (eq .ClusterLabels.env "prod") }`,
				"join":    `${ .ClusterValues.zones | join "," }`,
				"dict":    `${ dict "a" .ClusterName | toJson }`,
				"set":     `${ $d := dict "a" 1 }${ $_ := set $d "a" 2 }${ $d.a }`,
				"printf":  `${ printf "%05d-%.2f" 7 1.5 }`,
				"range":   `${ range $k, $v := .ClusterAnnotations }${ $k }=${ $v }${ end }`,
			},
			want: map[string]interface{}{
				"upper":   "PROD",
				"default": "standard",
				"hasKey":  true,
				"get":     "eu",
				"replace": "prod_1",
				"trunc":   "fleet",
				"b64enc":  "cHJvZC0x",
				"sha":     "7d7c1b6e",
				"ternary": "big",
				"join":    "a,b",
				"dict":    map[string]interface{}{"a": "prod-1"},
				"set":     2.0,
				"printf":  "00007-1.50",
				"range":   "owner=ops",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ProcessTemplateValues(tt.values, tplContext)
			g.Expect(err).NotTo(HaveOccurred())
			if tt.name == "sprig functions" {
				// Computed here rather than written out by hand.
				g.Expect(got["sha"]).To(HaveLen(8))
				got["sha"] = "7d7c1b6e"
			}
			g.Expect(got).To(Equal(tt.want))
		})
	}
	// set changes the rendering's copy, not the context.
	g := NewWithT(t)
	got, err := ProcessTemplateValues(map[string]interface{}{
		"v": `${ $_ := set .ClusterLabels "env" "changed" }${ $_ := set .ClusterValues.image "tag" "v9" }${ .ClusterLabels.env }-${ .ClusterValues.image.tag }`,
	}, tplContext)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(map[string]interface{}{"v": "changed-v9"}))
	g.Expect(tplContext.ClusterLabels["env"]).To(Equal("prod"))
	g.Expect(tplContext.ClusterValues["image"]).To(Equal(map[string]interface{}{"tag": "v2"}))
}

// Fleet's helm.templateValues, global.fleet.clusterLabels.<label> and
// disablePreProcess, all in RenderHelmValues.
func TestRenderHelmValues(t *testing.T) {
	values := func(m map[string]interface{}) *fleet.GenericMap { return &fleet.GenericMap{Data: m} }
	tests := []struct {
		name string
		helm fleet.HelmOptions
		want map[string]interface{}
	}{
		{
			name: "global.fleet.clusterLabels in maps, at any depth, and maps in lists",
			helm: fleet.HelmOptions{Values: values(map[string]interface{}{
				"env":     "global.fleet.clusterLabels.env",
				"missing": "global.fleet.clusterLabels.tier",
				"nested":  map[string]interface{}{"region": "global.fleet.clusterLabels.region"},
				"list":    []interface{}{map[string]interface{}{"e": "global.fleet.clusterLabels.env"}, "global.fleet.clusterLabels.env"},
				"inside":  "x global.fleet.clusterLabels.env",
			})},
			want: map[string]interface{}{
				"env":     "prod",
				"missing": "",
				"nested":  map[string]interface{}{"region": "eu"},
				// Fleet leaves list items that are plain strings alone.
				"list":   []interface{}{map[string]interface{}{"e": "prod"}, "global.fleet.clusterLabels.env"},
				"inside": "x global.fleet.clusterLabels.env",
			},
		},
		{
			name: "global.fleet.clusterLabels even with disablePreProcess; templates left as written",
			helm: fleet.HelmOptions{DisablePreProcess: true, Values: values(map[string]interface{}{
				"env": "global.fleet.clusterLabels.env", "t": "${ .ClusterName }",
			}), TemplateValues: map[string]string{"x": "${ .ClusterName }"}},
			want: map[string]interface{}{"env": "prod", "t": "${ .ClusterName }"},
		},
		{
			name: "templateValues: each a template read as YAML, set at the top level over values",
			helm: fleet.HelmOptions{
				Values: values(map[string]interface{}{"name": "${ .ClusterName }", "image": map[string]interface{}{"tag": "v1", "repo": "r"}}),
				TemplateValues: map[string]string{
					"image":    `{"tag": "${ .ClusterValues.image.tag }"}`,
					"replicas": "${ .ClusterValues.replicas }",
					"zones":    "${ toJson .ClusterValues.zones }",
					"env":      "${ .ClusterLabels.env }",
				},
			},
			want: map[string]interface{}{
				"name":     "prod-1",
				"image":    map[string]interface{}{"tag": "v2"}, // replaced, not merged, as in Fleet
				"replicas": 3.0,
				"zones":    []interface{}{"a", "b"},
				"env":      "prod",
			},
		},
		{
			name: "templateValues without values",
			helm: fleet.HelmOptions{TemplateValues: map[string]string{"cluster": "${ .ClusterName }"}},
			want: map[string]interface{}{"cluster": "prod-1"},
		},
		{
			name: "nothing",
			helm: fleet.HelmOptions{},
			want: nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			before := tt.helm.DeepCopy()
			got, err := RenderHelmValues(&tt.helm, tplContext)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
			g.Expect(&tt.helm).To(Equal(before), "the options are not changed")
		})
	}
}

// A cluster without spec.templateValues shows .ClusterValues as an empty
// map, as Fleet's manager does (it passes {} when the Cluster has none): a
// template printing it gives {}, not null, and hasKey works on it.
func TestClusterValuesOfAClusterWithoutTemplateValues(t *testing.T) {
	for _, cluster := range []*fleet.Cluster{
		{ObjectMeta: metav1.ObjectMeta{Name: "bare", Namespace: "fleet-default"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "empty", Namespace: "fleet-default"},
			Spec: fleet.ClusterSpec{TemplateValues: &fleet.GenericMap{}}},
	} {
		t.Run(cluster.Name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := RenderHelmValues(&fleet.HelmOptions{
				Values: &fleet.GenericMap{Data: map[string]interface{}{
					"json": "${ toJson .ClusterValues }",
					"len":  "${ len .ClusterValues }",
					"has":  `${ hasKey .ClusterValues "x" }`,
				}},
				TemplateValues: map[string]string{"all": "${ toJson .ClusterValues }"},
			}, TemplateContextFor(cluster))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(map[string]interface{}{
				"json": map[string]interface{}{},
				"len":  0.0,
				"has":  false,
				"all":  map[string]interface{}{},
			}))
		})
	}
}

func TestDependsOnCluster(t *testing.T) {
	values := func(m map[string]interface{}) *fleet.GenericMap { return &fleet.GenericMap{Data: m} }
	for _, tt := range []struct {
		name string
		helm *fleet.HelmOptions
		want bool
	}{
		{"no helm", nil, false},
		{"plain values", &fleet.HelmOptions{Values: values(map[string]interface{}{"a": "b"})}, false},
		{"template", &fleet.HelmOptions{Values: values(map[string]interface{}{"a": []interface{}{"${ .ClusterName }"}})}, true},
		{"template in a key", &fleet.HelmOptions{Values: values(map[string]interface{}{"${ .ClusterName }": 1})}, true},
		{"template, disablePreProcess", &fleet.HelmOptions{DisablePreProcess: true, Values: values(map[string]interface{}{"a": "${ .ClusterName }"})}, false},
		{"label value", &fleet.HelmOptions{Values: values(map[string]interface{}{"a": map[string]interface{}{"b": "global.fleet.clusterLabels.x"}})}, true},
		{"label value, disablePreProcess", &fleet.HelmOptions{DisablePreProcess: true, Values: values(map[string]interface{}{"a": "global.fleet.clusterLabels.x"})}, true},
		{"label prefix as a list item", &fleet.HelmOptions{Values: values(map[string]interface{}{"a": []interface{}{"global.fleet.clusterLabels.x"}})}, false},
		{"templateValues", &fleet.HelmOptions{TemplateValues: map[string]string{"a": "b"}}, true},
		{"templateValues, disablePreProcess", &fleet.HelmOptions{DisablePreProcess: true, TemplateValues: map[string]string{"a": "b"}}, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			NewWithT(t).Expect(DependsOnCluster(tt.helm)).To(Equal(tt.want))
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
			err:    []string{`helm values, line 2 "b: ${ .ClusterLabels.tier }"`, `map has no entry for key "tier"`},
		},
		{
			name:   "missing value",
			values: map[string]interface{}{"l": []interface{}{"${ .ClusterValues.nope }"}},
			err:    []string{`helm values, line 2 "- ${ .ClusterValues.nope }"`, `"nope"`},
		},
		{
			name:   "syntax",
			values: map[string]interface{}{"a": "${ .ClusterName "},
			err:    []string{"helm values, line 1", "unterminated"},
		},
		{
			name:   "unknown function",
			values: map[string]interface{}{"a": "${ .ClusterName | toYaml }"},
			err:    []string{`function "toYaml" not defined`},
		},
		{
			name:   "env is refused, as in Fleet",
			values: map[string]interface{}{"a": `${ env "HOME" }`},
			err:    []string{`function "env" is not allowed in values templates: it would read the manager's environment`},
		},
		{
			name:   "expandenv is refused, even where it would not run",
			values: map[string]interface{}{"a": `${ if false }${ expandenv "$HOME" }${ end }`},
			err:    []string{`function "expandenv" is not allowed`},
		},
		{
			name:   "no network",
			values: map[string]interface{}{"a": `${ getHostByName "example.com" }`},
			err:    []string{`function "getHostByName" is not allowed in values templates: it would make a DNS lookup`},
		},
		{
			name:   "no key generation",
			values: map[string]interface{}{"a": `${ (genCA "x" 1).Cert }`},
			err:    []string{`function "genCA" is not allowed`},
		},
		{
			name:   "output that is not YAML",
			values: map[string]interface{}{"a": `${ printf "%c" 39 }`},
			err:    []string{"helm values render to invalid YAML"},
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
	g := NewWithT(t)
	_, err := RenderHelmValues(&fleet.HelmOptions{TemplateValues: map[string]string{"x": `${ env "HOME" }`}}, tplContext)
	g.Expect(err).To(MatchError(ContainSubstring(`helm templateValues x: template "${ env \"HOME\" }": function "env" is not allowed`)))
	_, err = RenderHelmValues(&fleet.HelmOptions{TemplateValues: map[string]string{"x": `a: [`}}, tplContext)
	g.Expect(err).To(MatchError(ContainSubstring(`helm templateValues x: the template renders "a: [", which is not YAML`)))
}

func TestProcessTemplateValuesCopies(t *testing.T) {
	g := NewWithT(t)
	values := map[string]interface{}{"m": map[string]interface{}{"x": "${ .ClusterName }"}, "plain": map[string]interface{}{"a": "b"}}
	got, err := ProcessTemplateValues(values, tplContext)
	g.Expect(err).NotTo(HaveOccurred())
	got["plain"].(map[string]interface{})["a"] = "changed"
	g.Expect(values).To(Equal(map[string]interface{}{"m": map[string]interface{}{"x": "${ .ClusterName }"}, "plain": map[string]interface{}{"a": "b"}}), "input unchanged")

	plain := map[string]interface{}{"plain": map[string]interface{}{"a": "b"}}
	got, err = ProcessTemplateValues(plain, tplContext)
	g.Expect(err).NotTo(HaveOccurred())
	got["plain"].(map[string]interface{})["a"] = "changed"
	g.Expect(plain["plain"]).To(Equal(map[string]interface{}{"a": "b"}), "input without templates unchanged")

	nilValues, err := ProcessTemplateValues(nil, tplContext)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(nilValues).To(BeNil())
}

// Labels and annotations of tools are left out of the context, as Fleet does,
// except Fleet's and Rancher's management labels.
func TestTemplateContextForAndDisablePreProcess(t *testing.T) {
	g := NewWithT(t)
	cluster := &fleet.Cluster{
		ObjectMeta: metav1.ObjectMeta{
			Name: "c1", Namespace: "fleet-default",
			Labels: map[string]string{
				"env": "dev", "kubectl.kubernetes.io/x": "1", "cattle.io/y": "2", "provisioning.cattle.io/z": "3",
				"fleet.cattle.io/a": "4", "management.cattle.io/cluster-name": "c-1",
			},
			Annotations: map[string]string{"a": "b", "kubectl.kubernetes.io/last-applied-configuration": "{}", "fleet.cattle.io/b": "c"},
		},
		Spec: fleet.ClusterSpec{TemplateValues: &fleet.GenericMap{Data: map[string]interface{}{"size": "s"}}},
	}
	ctx := TemplateContextFor(cluster)
	g.Expect(ctx).To(Equal(TemplateContext{
		ClusterName: "c1", ClusterNamespace: "fleet-default",
		ClusterLabels:      map[string]string{"env": "dev", "fleet.cattle.io/a": "4", "management.cattle.io/cluster-name": "c-1"},
		ClusterAnnotations: map[string]string{"a": "b"},
		ClusterValues:      map[string]interface{}{"size": "s"},
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
	got, err := RenderHelmValues(r.Options.Helm, ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(map[string]interface{}{"size": "${ .ClusterValues.size }"}), "left as written")
}

// Templates come from git: none may occupy the manager, however written.
func TestTemplatesAreBounded(t *testing.T) {
	for name, tmpl := range map[string]string{
		"huge range":              "${ range 100000000000 }${ end }",
		"huge range, printing":    "${ range $i := 100000000000 }${ $i }${ end }",
		"nested ranges":           "${ range 1000 }${ range 1000 }${ end }${ end }",
		"output":                  "${ range 60000 }" + strings.Repeat("x", 100) + "${ end }",
		"printf width":            `${ printf "%0999999999d" 1 }`,
		"printf star":             `${ printf "%*d" 999999999 1 }`,
		"recursion":               `${ define "a" }${ template "a" . }${ template "a" . }${ end }${ template "a" . }`,
		"definition":              `${ define "a" }x${ end }y`,
		"repeat":                  `${ repeat 1000000000 "x" }`,
		"indent":                  `${ indent 1000000000 "x" }`,
		"replace":                 `${ $s := repeat 2000 "x" }${ replace "" $s $s }`,
		"until":                   `${ until 1000000000 | len }`,
		"untilStep":               `${ untilStep 0 1000000000 1 | len }`,
		"seq":                     `${ seq 1000000000 | len }`,
		"random":                  `${ randAlphaNum 1000000000 | len }`,
		"join":                    `${ $s := repeat 100000 "x" }${ until 1000 | join $s | len }`,
		"wrapWith":                `${ $s := repeat 100000 "x" }${ wrapWith 1 $s $s | len }`,
		"regexReplaceAll":         `${ $s := repeat 10000 "x" }${ regexReplaceAll "" $s "$0$0" | len }`,
		"doubling":                `${ $s := "x" }${ range 60 }${ $s = printf "%s%s" $s $s }${ end }${ len $s }`,
		"doubling with cat":       `${ $s := "x" }${ range 60 }${ $s = cat $s $s }${ end }${ len $s }`,
		"deep nesting":            `${ $d := dict }${ range 100000 }${ $d = dict "a" $d }${ end }${ toPrettyJson $d | len }`,
		"a dict in itself":        `${ $d := dict }${ $_ := set $d "self" $d }${ $d }`,
		"a dict merged in itself": `${ $d := dict }${ $_ := merge $d (dict "self" $d) }${ $d }`,
		"uniq":                    `${ until 100000 | uniq | len }`,
		"chunk by zero":           `${ chunk 0 (list 1 2) }`,
		"slow on purpose":         `${ range 3 }${ bcrypt "x" }${ end }`,
		"small calls, many":       `${ $s := repeat 1000 "x" }${ range 100000 }${ $_ := upper $s }${ end }`,
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			start := time.Now()
			_, err := ProcessTemplateValues(map[string]interface{}{"v": tmpl}, TemplateContext{})
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(Or(ContainSubstring("not allowed"), ContainSubstring("more than"), ContainSubstring("larger than"),
				ContainSubstring("too long"), ContainSubstring("longer than"), ContainSubstring("into itself"), ContainSubstring("at least 1"), ContainSubstring("at most")))
			g.Expect(time.Since(start)).To(BeNumerically("<", 2*time.Second))
		})
	}
	// The budget is shared by every template of one call.
	values := map[string]interface{}{}
	for i := range 20 {
		values[fmt.Sprintf("k%d", i)] = "${ range 10000 }${ end }"
	}
	_, err := ProcessTemplateValues(values, TemplateContext{})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("iterate more than")))
	_, err = RenderHelmValues(&fleet.HelmOptions{
		Values:         &fleet.GenericMap{Data: map[string]interface{}{"a": "${ range 60000 }${ end }"}},
		TemplateValues: map[string]string{"b": "${ range 60000 }${ end }"},
	}, TemplateContext{})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring("iterate more than")), "values and templateValues share the budget")

	// Ordinary templates still work, up to the bounds.
	out, err := ProcessTemplateValues(map[string]interface{}{
		"r": `${ range $k, $v := .ClusterLabels }${ $k }=${ $v };${ end }`,
		"s": `${ repeat 1000 "ab" | len }`,
		"u": `${ until 1000 | len }`,
	}, TemplateContext{ClusterLabels: map[string]string{"a": "1"}})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	NewWithT(t).Expect(out).To(Equal(map[string]interface{}{"r": "a=1;", "s": 2000.0, "u": 1000.0}))
}

// The clock is the backstop of the other bounds.
func TestTemplatesTimeOut(t *testing.T) {
	defer func(d time.Duration) { templateTimeout = d }(templateTimeout)
	templateTimeout = 50 * time.Millisecond
	g := NewWithT(t)
	start := time.Now()
	_, err := ProcessTemplateValues(map[string]interface{}{"v": `${ range 2 }${ bcrypt "x" }${ end }${ range 100000 }${ upper "x" }${ end }`}, TemplateContext{})
	g.Expect(err).To(MatchError(ContainSubstring("templates run longer than 50ms")))
	g.Expect(time.Since(start)).To(BeNumerically("<", 2*time.Second))
}
