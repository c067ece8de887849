package deployer

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/engine"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/kinds"
	"github.com/gitfleet/fleet/agent/release"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// render renders a chart as Helm would, without a cluster.
func render(t *testing.T, files Files, opts fleet.BundleDeploymentOptions) map[string]string {
	t.Helper()
	g := NewWithT(t)
	l, err := Detect(files, opts)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := BuildChart(files, l, opts, "rel")
	g.Expect(err).NotTo(HaveOccurred())
	values, err := Values(t.Context(), nil, opts, "default")
	g.Expect(err).NotTo(HaveOccurred())
	v, err := chartutil.ToRenderValues(c, values, chartutil.ReleaseOptions{Name: "rel", Namespace: "default"}, nil)
	g.Expect(err).NotTo(HaveOccurred())
	out, err := engine.Render(c, v)
	g.Expect(err).NotTo(HaveOccurred())
	return out
}

func joined(out map[string]string) string {
	var b strings.Builder
	for _, n := range sortedNames(toFiles(out)) {
		b.WriteString(out[n])
	}
	return b.String()
}

func toFiles(m map[string]string) Files {
	f := Files{}
	for k, v := range m {
		f[k] = []byte(v)
	}
	return f
}

func TestPlainManifestsWrapping(t *testing.T) {
	cases := []struct {
		name     string
		files    Files
		opts     fleet.BundleDeploymentOptions
		contains []string
		excludes []string
	}{{
		name:     "template actions in manifests are kept verbatim",
		files:    Files{"cm.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: tpl}\ndata:\n  t: '{{ .Values.x }} and {{- trim }}'\n")},
		contains: []string{"t: '{{ .Values.x }} and {{- trim }}'"},
	}, {
		name: "yaml, yml and json manifests; README and non-objects dropped",
		files: Files{
			"a.yaml":      []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a2}\n"),
			"sub/b.yml":   []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n"),
			"c.json":      []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"c"}}`),
			"README.md":   []byte("# not a manifest"),
			"values.yaml": []byte("replicas: 2\n"),
			"list.json":   []byte(`[1,2]`),
		},
		contains: []string{"name: a\n", "name: a2\n", "name: b\n", "name: c\n"},
		excludes: []string{"replicas: 2"},
	}, {
		name: "chart and kustomize directories and overlays are not plain manifests",
		files: Files{
			"cm.yaml":                     []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: base}\ndata: {color: blue}\n"),
			"chart/Chart.yaml":            []byte("apiVersion: v2\nname: chart\nversion: 1.0.0\n"),
			"chart/templates/x.yaml":      []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-chart}\n"),
			"kust/kustomization.yaml":     []byte("resources: [x.yaml]\n"),
			"kust/x.yaml":                 []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-kust}\n"),
			"overlays/prod/extra.yaml":    []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-overlay}\n"),
			"overlays/prod/cm_patch.yaml": []byte("data: {color: red}\n"),
		},
		contains: []string{"name: base", "color: blue"},
		excludes: []string{"from-chart", "from-kust", "from-overlay", "color: red"},
	}, {
		name: "a selected overlay adds files and patches the base",
		files: Files{
			"cm.yaml":                     []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: base}\ndata: {color: blue, size: s}\n"),
			"overlays/prod/extra.yaml":    []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: from-overlay}\n"),
			"overlays/prod/cm_patch.yaml": []byte("data: {color: red, size: null}\n"),
		},
		opts:     fleet.BundleDeploymentOptions{YAML: &fleet.YAMLOptions{Overlays: []string{"prod"}}},
		contains: []string{"name: base", "color: red", "name: from-overlay"},
		excludes: []string{"color: blue", "size:"},
	}, {
		// As in Fleet: a built-in kind is patched strategically, so the
		// patch of one container's image keeps the container's other fields
		// and the other containers.
		name: "a patch of a built-in kind merges lists by their keys",
		files: Files{
			"deploy.yaml": []byte(strings.Join([]string{
				"apiVersion: apps/v1", "kind: Deployment", "metadata: {name: app}", "spec:", "  template:", "    spec:", "      containers:",
				"      - {name: app, image: app:1, ports: [{containerPort: 8080}], env: [{name: MODE, value: base}]}",
				"      - {name: sidecar, image: sidecar:1}", ""}, "\n")),
			"overlays/prod/deploy_patch.yaml": []byte("spec:\n  template:\n    spec:\n      containers:\n      - {name: app, image: app:2}\n"),
		},
		opts:     fleet.BundleDeploymentOptions{YAML: &fleet.YAMLOptions{Overlays: []string{"prod"}}},
		contains: []string{"image: app:2", "containerPort: 8080", "value: base", "image: sidecar:1"},
		excludes: []string{"image: app:1"},
	}, {
		// As in Fleet: the bundle's templates/ are Helm templates, rendered
		// with the release's values; other manifests stay verbatim.
		name: "templates/ of plain manifests are rendered by Helm",
		files: Files{
			"templates/cm.yaml": []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: {{ .Release.Name }}-t}\ndata: {replicas: {{ .Values.replicas | quote }}}\n"),
			"plain.yaml":        []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}\ndata: {text: \"{{ not a template }}\"}\n"),
		},
		opts:     fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]interface{}{"replicas": 3}}}},
		contains: []string{"name: rel-t", `replicas: "3"`, "{{ not a template }}"},
	}, {
		name: "a patch that is a list is a JSON patch",
		files: Files{
			"deploy.yaml": []byte("apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: app}\nspec: {replicas: 1, template: {spec: {containers: [{name: app, image: app:1}]}}}\n"),
			"overlays/prod/deploy_patch.yaml": []byte("- {op: replace, path: /spec/replicas, value: 3}\n" +
				"- {op: add, path: /spec/template/spec/containers/0/args, value: [--prod]}\n"),
		},
		opts:     fleet.BundleDeploymentOptions{YAML: &fleet.YAMLOptions{Overlays: []string{"prod"}}},
		contains: []string{"replicas: 3", "- --prod", "image: app:1"},
		excludes: []string{"replicas: 1"},
	}, {
		name: "a kind client-go does not know is merge-patched",
		files: Files{
			"cr.yaml":                     []byte("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\nspec: {items: [a, b], size: s}\n"),
			"overlays/prod/cr_patch.yaml": []byte("spec: {items: [c]}\n"),
		},
		opts:     fleet.BundleDeploymentOptions{YAML: &fleet.YAMLOptions{Overlays: []string{"prod"}}},
		contains: []string{"- c", "size: s"},
		excludes: []string{"- a"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			out := joined(render(t, tc.files, tc.opts))
			for _, c := range tc.contains {
				g.Expect(out).To(ContainSubstring(c))
			}
			for _, e := range tc.excludes {
				g.Expect(out).NotTo(ContainSubstring(e))
			}
		})
	}
}

func TestDetect(t *testing.T) {
	chart := []byte("apiVersion: v2\nname: c\nversion: 0.1.0\n")
	kust := []byte("resources: []\n")
	cases := []struct {
		name  string
		files Files
		opts  fleet.BundleDeploymentOptions
		want  Layout
		err   string
	}{
		{name: "plain", files: Files{"a.yaml": nil}, want: Layout{Style: StyleManifests}},
		{name: "chart at root", files: Files{"Chart.yaml": chart}, want: Layout{Style: StyleHelm}},
		{name: "chart at helm.chart", files: Files{"charts/app/Chart.yaml": chart},
			opts: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Chart: "./charts/app"}}, want: Layout{Style: StyleHelm, ChartPath: "charts/app"}},
		{name: "missing chart", files: Files{"a.yaml": nil},
			opts: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Chart: "nope"}}, err: `helm.chart "nope": the bundle has no chart there`},
		{name: "kustomize dir", files: Files{"overlays/dev/kustomization.yaml": kust},
			opts: fleet.BundleDeploymentOptions{Kustomize: &fleet.KustomizeOptions{Dir: "overlays/dev"}},
			want: Layout{Style: StyleKustomize, KustomizeDir: "overlays/dev", HasKustomize: true}},
		{name: "kustomization at root", files: Files{"kustomization.yaml": kust}, want: Layout{Style: StyleKustomize, HasKustomize: true}},
		{name: "chart post-rendered by kustomize", files: Files{"Chart.yaml": chart, "kustomization.yaml": kust},
			want: Layout{Style: StyleHelm, HasKustomize: true}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			l, err := Detect(tc.files, tc.opts)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(l).To(Equal(tc.want))
		})
	}
}

func TestHelmChartWithValues(t *testing.T) {
	g := NewWithT(t)
	files := Files{
		"chart/Chart.yaml":          []byte("apiVersion: v2\nname: app\nversion: 0.1.0\n"),
		"chart/values.yaml":         []byte("color: blue\nsize: s\n"),
		"chart/templates/cm.yaml":   []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {color: {{ .Values.color }}, size: {{ .Values.size }}}\n"),
		"chart/templates/_help.tpl": []byte(`{{- define "x" }}x{{ end }}`),
	}
	opts := fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Chart: "chart", Values: &fleet.GenericMap{Data: map[string]interface{}{"color": "cluster-1"}}}}
	out := joined(render(t, files, opts))
	g.Expect(out).To(ContainSubstring("color: cluster-1"))
	g.Expect(out).To(ContainSubstring("size: s"))
}

func TestKustomize(t *testing.T) {
	g := NewWithT(t)
	files := Files{
		"base/kustomization.yaml":         []byte("resources: [cm.yaml]\n"),
		"base/cm.yaml":                    []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {color: blue}\n"),
		"overlays/dev/kustomization.yaml": []byte("resources: [../../base]\nnamePrefix: dev-\ncommonLabels: {env: dev}\n"),
	}
	opts := fleet.BundleDeploymentOptions{Kustomize: &fleet.KustomizeOptions{Dir: "overlays/dev"}}
	out := joined(render(t, files, opts))
	g.Expect(out).To(ContainSubstring("name: dev-app"))
	g.Expect(out).To(ContainSubstring("env: dev"))

	// As a post-renderer, the chart's output becomes a resource of the
	// kustomization.
	post, err := Kustomize(Files{"kustomization.yaml": []byte("namePrefix: k-\n")}, "", []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(post)).To(ContainSubstring("name: k-x"))
}

func scope(gvk schema.GroupVersionKind) (bool, bool) {
	switch gvk.Kind {
	case "Namespace", "ClusterRole":
		return false, true
	case "Unknown":
		return false, false
	}
	return true, true
}

func TestTransformNamespaces(t *testing.T) {
	u := func(kind, ns string) *unstructured.Unstructured {
		o := &unstructured.Unstructured{}
		o.SetAPIVersion("v1")
		o.SetKind(kind)
		o.SetName("x")
		o.SetNamespace(ns)
		return o
	}
	cases := []struct {
		name   string
		obj    *unstructured.Unstructured
		force  string
		wantNS string
		err    string
	}{
		{name: "namespaced without namespace gets the release namespace", obj: u("ConfigMap", ""), wantNS: "rel-ns"},
		{name: "namespaced with a namespace keeps it", obj: u("ConfigMap", "other"), wantNS: "other"},
		{name: "forced namespace wins", obj: u("ConfigMap", "other"), force: "forced", wantNS: "forced"},
		{name: "cluster-scoped keeps no namespace", obj: u("ClusterRole", ""), wantNS: ""},
		{name: "cluster-scoped with a forced namespace is an error", obj: u("ClusterRole", ""), force: "forced",
			err: `ClusterRole x is cluster-scoped, but the bundle's namespace option "forced"`},
		{name: "unknown kind is left alone", obj: u("Unknown", ""), wantNS: ""},
		{name: "unknown kind is forced", obj: u("Unknown", ""), force: "forced", wantNS: "forced"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := Transform([]*unstructured.Unstructured{tc.obj}, Target{ReleaseName: "rel", ReleaseNamespace: "rel-ns", ForceNamespace: tc.force}, scope)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(tc.obj.GetNamespace()).To(Equal(tc.wantNS))
			g.Expect(tc.obj.GetLabels()).To(Equal(map[string]string{fleet.ReleaseNameLabel: "rel", fleet.ReleaseNamespaceLabel: "rel-ns"}))
		})
	}
}

func TestDecodeContent(t *testing.T) {
	g := NewWithT(t)
	raw, err := json.Marshal(map[string]interface{}{"resources": []fleet.BundleResource{{Name: "./a.yaml", Content: "x"}}})
	g.Expect(err).NotTo(HaveOccurred())
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	_, _ = zw.Write(raw)
	_ = zw.Close()
	sum := sha256.Sum256(raw)
	c := &fleet.Content{Content: buf.Bytes(), SHA256Sum: hex.EncodeToString(sum[:])}
	files, err := DecodeContent(c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(files).To(Equal(Files{"a.yaml": []byte("x")}))

	c.SHA256Sum = strings.Repeat("0", 64)
	_, err = DecodeContent(c)
	g.Expect(err).To(MatchError(ContainSubstring("is corrupt")))
	g.Expect(ContentName("s-abc:123")).To(Equal("s-abc"))
}

func TestReleaseFor(t *testing.T) {
	g := NewWithT(t)
	g.Expect(ReleaseFor("app", fleet.BundleDeploymentOptions{})).To(Equal(ReleaseKey{Namespace: "default", Name: "app"}))
	g.Expect(ReleaseFor("app", fleet.BundleDeploymentOptions{DefaultNamespace: "d", TargetNamespace: "t",
		Helm: &fleet.HelmOptions{ReleaseName: "r"}})).To(Equal(ReleaseKey{Namespace: "t", Name: "r"}))
	long := release.Name(strings.Repeat("a", 60))
	g.Expect(long).To(HaveLen(53))
	g.Expect(long).To(HavePrefix(strings.Repeat("a", 47) + "-"))
}

func TestMergeValues(t *testing.T) {
	g := NewWithT(t)
	got := MergeValues(map[string]interface{}{"a": map[string]interface{}{"x": 1, "y": 2}, "b": 1},
		map[string]interface{}{"a": map[string]interface{}{"y": 3}, "c": 4})
	g.Expect(got).To(Equal(map[string]interface{}{"a": map[string]interface{}{"x": 1, "y": 3}, "b": 1, "c": 4}))
}

func TestIsTransient(t *testing.T) {
	g := NewWithT(t)
	g.Expect(IsTransient(errString("Kubernetes cluster unreachable: dial tcp: connection refused"))).To(BeTrue())
	g.Expect(IsTransient(errString(`ConfigMap "Bad_Name" is invalid`))).To(BeFalse())
	g.Expect(IsTransient(outcome.Stall(fleet.ReasonInstallFailed, errString("connection refused")))).To(BeFalse())
}

func TestStallUnlessTransient(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		stalls bool
		reason string
	}{
		{name: "nil stays nil"},
		{name: "unreachable backs off", err: errString("Kubernetes cluster unreachable: dial tcp: connection refused")},
		{name: "conflict backs off", err: apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "cm", errString("changed"))},
		{name: "rejected object stalls", err: errString(`ConfigMap "Bad_Name" is invalid`), stalls: true, reason: fleet.ReasonInstallFailed},
		{name: "a stall keeps its reason", err: fmt.Errorf("helm.valuesFrom[0]: %w",
			outcome.Stallf(fleet.ReasonSecretNotFound, "secret x not found")), stalls: true, reason: fleet.ReasonSecretNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := stallUnlessTransient(fleet.ReasonInstallFailed, tc.err)
			g.Expect(outcome.IsStalling(err)).To(Equal(tc.stalls))
			if tc.err == nil {
				g.Expect(err).ToNot(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(tc.err.Error()))
			g.Expect(outcome.ReasonOf(err, "")).To(Equal(tc.reason))
		})
	}
}

type errString string

func (e errString) Error() string { return string(e) }

func TestValuesFromStallsOnWhatTheAuthorMustFix(t *testing.T) {
	local, err := controlPlane(t).Client(kinds.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	const ns = "values-from"
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "vals"}, Data: map[string]string{"values.yaml": "a: 1\n", "bad": "[x"}},
	} {
		if err := local.Create(t.Context(), o); err != nil {
			t.Fatalf("creating %T %s: %v", o, o.GetName(), err)
		}
	}
	from := func(v fleet.ValuesFrom) fleet.BundleDeploymentOptions {
		return fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{ValuesFrom: []fleet.ValuesFrom{v}}}
	}
	cases := []struct {
		name   string
		from   fleet.ValuesFrom
		reason string
	}{
		{name: "read", from: fleet.ValuesFrom{ConfigMapKeyRef: &fleet.ConfigMapKeySelector{Name: "vals"}}},
		{name: "missing secret", from: fleet.ValuesFrom{SecretKeyRef: &fleet.SecretKeySelector{Name: "creds"}}, reason: fleet.ReasonSecretNotFound},
		{name: "missing configmap", from: fleet.ValuesFrom{ConfigMapKeyRef: &fleet.ConfigMapKeySelector{Name: "none"}}, reason: fleet.ReasonInvalidValues},
		{name: "missing key", from: fleet.ValuesFrom{ConfigMapKeyRef: &fleet.ConfigMapKeySelector{Name: "vals", Key: "other"}}, reason: fleet.ReasonInvalidValues},
		{name: "not YAML", from: fleet.ValuesFrom{ConfigMapKeyRef: &fleet.ConfigMapKeySelector{Name: "vals", Key: "bad"}}, reason: fleet.ReasonInvalidValues},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			v, err := Values(t.Context(), local, from(tc.from), ns)
			if tc.reason == "" {
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(v).To(HaveKeyWithValue("a", BeNumerically("==", 1)))
				return
			}
			g.Expect(outcome.IsStalling(err)).To(BeTrue(), "%v", err)
			g.Expect(outcome.ReasonOf(err, "")).To(Equal(tc.reason))
			g.Expect(err.Error()).To(HavePrefix("helm.valuesFrom[0]: "))
		})
	}
}

func TestPatchDocumentsRefusals(t *testing.T) {
	g := NewWithT(t)
	two := []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: b}\n")
	_, err := patchDocuments(two, []byte("- {op: add, path: /data, value: {}}\n"))
	g.Expect(err).To(MatchError(ContainSubstring("patches a file of one document, and this one has 2")))
	_, err = patchDocuments(two, []byte("just a string\n"))
	g.Expect(err).To(MatchError(ContainSubstring("a patch is a map of fields to merge, or a list of JSON patch operations")))
	first, _, found := bytes.Cut(two, []byte("---"))
	g.Expect(found).To(BeTrue())
	_, err = patchDocuments(first, []byte("- {op: remove, path: /nothing}\n"))
	g.Expect(err).To(MatchError(ContainSubstring("applying the JSON patch")))
	out, err := patchDocuments(two, []byte("# nothing to patch yet\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal(two), "an empty patch changes nothing")
	out, err = patchDocuments(two, []byte("metadata: {name: b}\ndata: {k: v}\n"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).To(Equal("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\ndata:\n  k: v\nkind: ConfigMap\nmetadata:\n  name: b\n"),
		"a merge patch naming a document patches that one alone")
}
