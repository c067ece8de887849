package conformance_test

import (
	"testing"

	. "github.com/onsi/gomega"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

const configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"

// discoveryCase is a repository, the `fleet apply` arguments, and the
// Bundles Fleet makes of it: their names and resource names, plus what
// check looks at beyond that.
type discoveryCase struct {
	name  string
	files map[string]string
	args  []string
	want  map[string][]string // bundle name -> resource names, sorted
	check func(g Gomega, a applied)
}

func runDiscovery(t *testing.T, cases []discoveryCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := apply(t, repo(t, tc.files), tc.args...)
			g.Expect(got.Err).NotTo(HaveOccurred())
			byBundle := map[string][]string{}
			for _, b := range got.Bundles {
				byBundle[b.Name] = resourceNames(b)
			}
			g.Expect(byBundle).To(Equal(tc.want))
			if tc.check != nil {
				tc.check(g, got)
			}
		})
	}
}

// bundle returns the printed Bundle of that name, or an empty one (the
// names were already compared).
func (a applied) bundle(name string) fleet.Bundle {
	for _, b := range a.Bundles {
		if b.Name == name {
			return b
		}
	}
	return fleet.Bundle{}
}

// Which directories become bundles, and which files are their resources.
// The rule is Fleet's `fleet apply` scan (internal/cmd/cli/apply:
// shouldCreateBundleForThisPath): the path is a bundle when it holds a
// fleet.yaml, or when it or a sub-directory not below a fleet.yaml holds a
// .yaml/.yml file; every sub-directory with a fleet.yaml is a bundle. A
// bundle without resources is left out (Fleet's ErrNoResources), hidden files
// are never resources (Fleet's GetContent), and, as the API contract says,
// a sub-directory that is a bundle of its own is not a resource of its parent.
func TestBundleDiscovery(t *testing.T) {
	runDiscovery(t, []discoveryCase{{
		// Fleet issue #737 / PR #1309: manifests at the root make a root
		// bundle beside the nested fleet.yaml bundles.
		name: "root manifests beside nested fleet.yaml directories",
		files: map[string]string{
			"cm.yaml":          configMap,
			"README.md":        "docs ride along",
			"app/fleet.yaml":   "defaultNamespace: app\n",
			"app/deploy.yaml":  configMap,
			"tools/fleet.yml":  "",
			"tools/tools.yaml": configMap,
		},
		args: []string{"repo"},
		want: map[string][]string{
			// As Fleet ships them, the nested bundles' files ride along.
			"repo":       {"README.md", "app/deploy.yaml", "app/fleet.yaml", "cm.yaml", "tools/fleet.yml", "tools/tools.yaml"},
			"repo-app":   {"deploy.yaml"},
			"repo-tools": {"tools.yaml"},
		},
		check: func(g Gomega, a applied) {
			g.Expect(a.bundle("repo-app").Spec.DefaultNamespace).To(Equal("app"))
			g.Expect(a.bundle("repo").Spec.DefaultNamespace).To(BeEmpty())
		},
	}, {
		// Fleet's "simple resources in a nested folder" case: no fleet.yaml
		// anywhere, manifests only below the root: one bundle with all.
		name: "manifests only in sub-directories give one bundle with all of them",
		files: map[string]string{
			"README.md":                  "x",
			"nested/svc/svc.yaml":        configMap,
			"nested/deploy/deploy.yml":   configMap,
			"nested/deploy/notes.txt":    "x",
			"nested/deploy/.hidden.yaml": configMap,
		},
		args: []string{"repo", "."},
		want: map[string][]string{
			"repo": {"README.md", "nested/deploy/deploy.yml", "nested/deploy/notes.txt", "nested/svc/svc.yaml"},
		},
	}, {
		// Fleet issue #737: only fleet.yaml directories, nothing loose
		// (README.md is no manifest): no root bundle.
		name: "no root bundle when every manifest is below a fleet.yaml",
		files: map[string]string{
			"README.md":                    "x",
			"docs/guide.txt":               "x",
			"lib/crd/helm/fleet.yaml":      "",
			"lib/crd/helm/Chart.yaml":      "apiVersion: v2\nname: crd\nversion: 0.1.0\n",
			"lib/crd/helm/templates/a.yml": configMap,
			"lib/ref/helm/fleet.yaml":      "",
			"lib/ref/helm/cm.yaml":         configMap,
		},
		args: []string{"edge-app", "lib"},
		want: map[string][]string{
			"edge-app-lib-crd-helm": {"Chart.yaml", "templates/a.yml"},
			"edge-app-lib-ref-helm": {"cm.yaml"},
		},
	}, {
		// Fleet's bundlereader (GetContent) leaves out only the bundle's own
		// fleet.yaml: a sub-directory that is a bundle of its own also ships
		// in its parent, its fleet.yaml included, at any depth (Fleet's
		// nested_mixed_two_levels); its agent deploys none of it there.
		name: "fleet.yaml directories ship in the parent's resources too",
		files: map[string]string{
			"fleet.yaml":                   "",
			"cm.yaml":                      configMap,
			"sub/fleet.yaml":               "",
			"sub/cm.yaml":                  configMap,
			"sub/plain/x.yaml":             configMap,
			"sub/deeper/fleet.yaml":        "",
			"sub/deeper/cm.yaml":           configMap,
			"sub/deeper/more/x.yaml":       configMap,
			"other/dir/with/fleet.yaml":    "name: named-elsewhere\n",
			"other/dir/with/manifest.yaml": configMap,
		},
		args: []string{"repo"},
		want: map[string][]string{
			"repo": {"cm.yaml", "other/dir/with/fleet.yaml", "other/dir/with/manifest.yaml", "sub/cm.yaml",
				"sub/deeper/cm.yaml", "sub/deeper/fleet.yaml", "sub/deeper/more/x.yaml", "sub/fleet.yaml", "sub/plain/x.yaml"},
			"repo-sub":        {"cm.yaml", "deeper/cm.yaml", "deeper/fleet.yaml", "deeper/more/x.yaml", "plain/x.yaml"},
			"repo-sub-deeper": {"cm.yaml", "more/x.yaml"},
			"named-elsewhere": {"manifest.yaml"},
		},
	}, {
		// Fleet's ErrNoResources: a fleet.yaml with nothing beside it makes
		// no bundle.
		name: "a bundle without resources is left out",
		files: map[string]string{
			"empty/fleet.yaml": "defaultNamespace: nothing\n",
			"full/cm.yaml":     configMap,
		},
		args: []string{"repo", "empty", "full"},
		want: map[string][]string{"repo-full": {"cm.yaml"}},
	}, {
		// Fleet's bundlereader reads no .helmignore: it ships every file of
		// a chart but hidden ones, the .helmignore among them, and Helm,
		// loading the chart from those files, reads none either.
		name: "a chart's .helmignore leaves nothing out, as in Fleet",
		files: map[string]string{
			"app/fleet.yaml":                  "helm:\n  chart: ./chart\n",
			"app/NOTES.md":                    "outside the chart: kept",
			"app/chart/Chart.yaml":            "apiVersion: v2\nname: web\nversion: 0.1.0\n",
			"app/chart/.helmignore":           "# comment\n*.md\ntests/\n*.tgz\n",
			"app/chart/README.md":             "listed in .helmignore",
			"app/chart/templates/cm.yaml":     configMap,
			"app/chart/templates/notes.md":    "listed in .helmignore",
			"app/chart/tests/test.yaml":       configMap,
			"app/chart/values.yaml":           "replicas: 1\n",
			"app/chart/charts/dep/Chart.yaml": "apiVersion: v2\nname: dep\nversion: 0.1.0\n",
		},
		args: []string{"repo", "app"},
		want: map[string][]string{
			"repo-app": {"NOTES.md", "chart/Chart.yaml", "chart/README.md", "chart/charts/dep/Chart.yaml",
				"chart/templates/cm.yaml", "chart/templates/notes.md", "chart/tests/test.yaml", "chart/values.yaml"},
		},
		check: func(g Gomega, a applied) {
			g.Expect(a.bundle("repo-app").Spec.Helm.Chart).To(Equal("./chart"))
		},
	}, {
		// Fleet's bundlereader (resources.go): helm.valuesFiles are read
		// relative to the bundle directory, also when they sit in a chart
		// inside it; they are merged over helm.values (Fleet's docs: values,
		// then valuesFiles, then valuesFrom), stay listed in the Bundle as
		// written and are not resources.
		name: "valuesFiles inside a chart in the bundle directory",
		files: map[string]string{
			"app/fleet.yaml": "helm:\n  chart: ./chart\n  values:\n    a: inline\n    b: inline\n" +
				"  valuesFiles:\n  - chart/values-prod.yaml\n" +
				"targetCustomizations:\n- name: eu\n  clusterSelector: {matchLabels: {region: eu}}\n" +
				"  helm:\n    valuesFiles: [chart/values-eu.yaml]\n",
			"app/chart/Chart.yaml":       "apiVersion: v2\nname: web\nversion: 0.1.0\n",
			"app/chart/values.yaml":      "a: chart-default\n",
			"app/chart/values-prod.yaml": "b: prod\nc: {d: prod}\n",
			"app/chart/values-eu.yaml":   "region: eu\n",
			"app/chart/templates/x.yaml": configMap,
		},
		args: []string{"repo", "app"},
		want: map[string][]string{
			"repo-app": {"chart/Chart.yaml", "chart/templates/x.yaml", "chart/values.yaml"},
		},
		check: func(g Gomega, a applied) {
			s := a.bundle("repo-app").Spec
			g.Expect(s.Helm.Chart).To(Equal("./chart"))
			g.Expect(s.Helm.ValuesFiles).To(Equal([]string{"chart/values-prod.yaml"}))
			g.Expect(s.Helm.Values.Data).To(Equal(map[string]interface{}{
				"a": "inline", "b": "prod", "c": map[string]interface{}{"d": "prod"},
			}))
			g.Expect(s.Targets).To(HaveLen(1))
			g.Expect(s.Targets[0].Name).To(Equal("eu"))
			g.Expect(s.Targets[0].Helm.ValuesFiles).To(Equal([]string{"chart/values-eu.yaml"}))
			g.Expect(s.Targets[0].Helm.Values.Data).To(Equal(map[string]interface{}{"region": "eu"}))
		},
	}})
}

// The driven scan of Fleet (GitRepo spec.bundles; `fleet apply
// --driven-scan`, Fleet's CreateBundlesDriven and its docs "Alternative scan,
// explicitly defined by the user"): each PATH is one bundle, "base" or
// "base:options"; nothing below a base is searched; the options file is a
// fleet.yaml under any name, relative to the base, and is no resource; the
// bundle is named after NAME, the base and the options file without its
// extension.
func TestDrivenScan(t *testing.T) {
	kustomize := map[string]string{
		"driven/simple/cm.yaml":                             configMap,
		"driven/simple/svc.yaml":                            configMap,
		"driven/helm/fleet.yaml":                            "defaultNamespace: from-fleet-yaml\n",
		"driven/helm/cm.yaml":                               configMap,
		"driven/helm/test/fleet.yaml":                       "defaultNamespace: not-read\n",
		"driven/kustomize/base/kustomization.yaml":          "resources: [secret.yaml]\n",
		"driven/kustomize/base/secret.yaml":                 configMap,
		"driven/kustomize/overlays/dev/kustomization.yaml":  "resources: [../../base]\n",
		"driven/kustomize/overlays/prod/kustomization.yaml": "resources: [../../base]\n",
		"driven/kustomize/dev.yaml":                         "namespace: kustomize-dev\nkustomize:\n  dir: overlays/dev\n",
		"driven/kustomize/prod.yaml":                        "namespace: kustomize-prod\nkustomize:\n  dir: overlays/prod\n",
		"driven/kustomize/overlays/dev/opts/dev.yml":        "kustomize:\n  dir: overlays/dev\n",
	}
	runDiscovery(t, []discoveryCase{{
		name:  "one bundle per base and options file",
		files: kustomize,
		args:  []string{"--driven-scan", "repo", "driven/simple", "driven/kustomize:dev.yaml", "driven/kustomize:prod.yaml"},
		want: map[string][]string{
			"repo-driven-simple": {"cm.yaml", "svc.yaml"},
			// The other options files ride along, as in Fleet.
			"repo-driven-kustomize-dev": {"base/kustomization.yaml", "base/secret.yaml",
				"overlays/dev/kustomization.yaml", "overlays/dev/opts/dev.yml", "overlays/prod/kustomization.yaml", "prod.yaml"},
			"repo-driven-kustomize-prod": {"base/kustomization.yaml", "base/secret.yaml", "dev.yaml",
				"overlays/dev/kustomization.yaml", "overlays/dev/opts/dev.yml", "overlays/prod/kustomization.yaml"},
		},
		check: func(g Gomega, a applied) {
			dev, prod := a.bundle("repo-driven-kustomize-dev").Spec, a.bundle("repo-driven-kustomize-prod").Spec
			g.Expect(dev.Kustomize.Dir).To(Equal("overlays/dev"))
			g.Expect(dev.TargetNamespace).To(Equal("kustomize-dev"))
			g.Expect(prod.Kustomize.Dir).To(Equal("overlays/prod"))
			g.Expect(prod.TargetNamespace).To(Equal("kustomize-prod"))
			g.Expect(a.bundle("repo-driven-simple").Spec.Kustomize).To(BeNil())
		},
	}, {
		// A base without options uses its own fleet.yaml; a fleet.yaml below
		// it is a plain file, as Fleet's "fleet file in a subfolder" case.
		name:  "a base without options reads its fleet.yaml and searches nothing below",
		files: kustomize,
		args:  []string{"--driven-scan", "repo", "driven/helm"},
		want:  map[string][]string{"repo-driven-helm": {"cm.yaml", "test/fleet.yaml"}},
		check: func(g Gomega, a applied) {
			g.Expect(a.bundle("repo-driven-helm").Spec.DefaultNamespace).To(Equal("from-fleet-yaml"))
		},
	}, {
		// Fleet's --driven-scan-sep, and an options file below the base: its
		// paths stay relative to the base.
		name:  "options file in a sub-directory, other separator",
		files: kustomize,
		args:  []string{"--driven-scan", "--driven-scan-sep", "|", "repo", "driven/kustomize|overlays/dev/opts/dev.yml"},
		want: map[string][]string{
			"repo-driven-kustomize-overlays-dev-opts-dev": {"base/kustomization.yaml", "base/secret.yaml", "dev.yaml",
				"overlays/dev/kustomization.yaml", "overlays/prod/kustomization.yaml", "prod.yaml"},
		},
		check: func(g Gomega, a applied) {
			g.Expect(a.bundle("repo-driven-kustomize-overlays-dev-opts-dev").Spec.Kustomize.Dir).To(Equal("overlays/dev"))
		},
	}})
}

func TestDrivenScanErrors(t *testing.T) {
	g := NewWithT(t)
	dir := repo(t, map[string]string{"a/cm.yaml": configMap})
	got := apply(t, dir, "--driven-scan", "repo", "a:b:c")
	g.Expect(got.Err).To(MatchError(ContainSubstring(`invalid bundle path "a:b:c"`)))
	got = apply(t, dir, "--driven-scan", "repo", "a:missing.yaml")
	g.Expect(got.Err).To(MatchError(ContainSubstring("a/missing.yaml does not exist")))
}

// Paths as Fleet's GitRepo job and `fleet apply` take them (Fleet's apply.go
// globDirs; GitRepo docs: "Path globbing is supported, for example
// ["charts/*"]", "If empty, "/" is the default"): leading slashes are
// dropped, a glob stands for every directory it matches, files and paths
// that match nothing add nothing.
func TestPaths(t *testing.T) {
	files := map[string]string{
		"charts/a/cm.yaml":            configMap,
		"charts/b/fleet.yaml":         "",
		"charts/b/cm.yaml":            configMap,
		"charts/b/sub/fleet.yaml":     "",
		"charts/b/sub/cm.yaml":        configMap,
		"charts/notes.yaml":           configMap,
		"envs/dev/app/cm.yaml":        configMap,
		"envs/prod/app/cm.yaml":       configMap,
		"envs/prod/other/cm.yaml":     configMap,
		"single-cluster/helm/cm.yaml": configMap,
	}
	runDiscovery(t, []discoveryCase{{
		name:  "a glob selects every matching directory, each searched",
		files: files,
		args:  []string{"repo", "charts/*"},
		want: map[string][]string{
			"repo-charts-a":     {"cm.yaml"},
			"repo-charts-b":     {"cm.yaml", "sub/cm.yaml", "sub/fleet.yaml"},
			"repo-charts-b-sub": {"cm.yaml"},
		},
	}, {
		name:  "a glob in the middle of a path",
		files: files,
		args:  []string{"repo", "envs/*/app"},
		want: map[string][]string{
			"repo-envs-dev-app":  {"cm.yaml"},
			"repo-envs-prod-app": {"cm.yaml"},
		},
	}, {
		name:  "a leading slash is the repository root",
		files: files,
		args:  []string{"examples", "/single-cluster/helm"},
		want:  map[string][]string{"examples-single-cluster-helm": {"cm.yaml"}},
	}, {
		name:  "a glob that matches nothing adds nothing",
		files: files,
		args:  []string{"repo", "nothing/*", "/envs/dev/*"},
		want:  map[string][]string{"repo-envs-dev-app": {"cm.yaml"}},
	}})
}

// "/" alone is the root, named after NAME only.
func TestPathSlashIsRoot(t *testing.T) {
	g := NewWithT(t)
	dir := repo(t, map[string]string{"cm.yaml": configMap})
	got := apply(t, dir, "repo", "/")
	g.Expect(got.Err).NotTo(HaveOccurred())
	g.Expect(got.names()).To(Equal([]string{"repo"}))
	g.Expect(resourceNames(got.Bundles[0])).To(Equal([]string{"cm.yaml"}))
}
