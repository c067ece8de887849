package bundlereader

import (
	"bytes"
	"context"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"

func TestReadLayouts(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		base  string
		paths []string
		// want maps bundle names to their resource names.
		want map[string][]string
	}{
		{
			name:  "plain manifests at the root are one bundle named after the base",
			files: map[string]string{"cm.yaml": cm, "svc.yaml": cm, "sub/deploy.yaml": cm, "README.md": "hi"},
			base:  "examples",
			want:  map[string][]string{"examples": {"README.md", "cm.yaml", "sub/deploy.yaml", "svc.yaml"}},
		},
		{
			name: "every directory with a fleet.yaml is a bundle; its files are also in the parent's, as Fleet ships them",
			files: map[string]string{
				"README.md":                              "root files are no bundle when fleet.yaml files exist",
				"single-cluster/helm/fleet.yaml":         "helm: {releaseName: x}",
				"single-cluster/helm/Chart.yaml":         "name: x",
				"single-cluster/helm/templates/cm.yaml":  cm,
				"single-cluster/helm/child/fleet.yml":    "{}",
				"single-cluster/helm/child/cm.yaml":      cm,
				"single-cluster/helm/child/deep/x.yaml":  cm,
				"single-cluster/manifests/fleet.yaml":    "",
				"single-cluster/manifests/a/b/cm.yaml":   cm,
				"single-cluster/manifests/.git/config":   "not a resource",
				"single-cluster/manifests/sub/.git":      "gitdir: elsewhere",
				"single-cluster/manifests/sub/cm.yaml":   cm,
				"multi-cluster/named/fleet.yaml":         "name: my-name",
				"multi-cluster/named/cm.yaml":            cm,
				"multi-cluster/UPPER Case/fleet.yaml":    "",
				"multi-cluster/UPPER Case/manifest.yaml": cm,
			},
			base: "examples",
			want: map[string][]string{
				"examples-single-cluster-helm":               {"Chart.yaml", "child/cm.yaml", "child/deep/x.yaml", "child/fleet.yml", "templates/cm.yaml"},
				"examples-single-cluster-helm-child":         {"cm.yaml", "deep/x.yaml"},
				"examples-single-cluster-manifests":          {"a/b/cm.yaml", "sub/cm.yaml"},
				"my-name":                                    {"cm.yaml"},
				"examples-multi-cluster-upper-case-ba26955f": {"manifest.yaml"},
			},
		},
		{
			name: "paths select sub-trees; a path without fleet.yaml is itself a bundle",
			files: map[string]string{
				"a/fleet.yaml":      "",
				"a/cm.yaml":         cm,
				"b/cm.yaml":         cm,
				"b/c/cm.yaml":       cm,
				"ignored/cm.yaml":   cm,
				"nothing/README.md": "no manifests here",
			},
			base:  "repo",
			paths: []string{"b", "./a", "a", "nothing"},
			want: map[string][]string{
				"repo-a": {"cm.yaml"},
				"repo-b": {"c/cm.yaml", "cm.yaml"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			root := tree(t, tt.files)
			bundles, err := Read(context.Background(), root, tt.paths, Options{Name: tt.base, Namespace: "fleet-default"})
			g.Expect(err).NotTo(HaveOccurred())
			got := map[string][]string{}
			for _, b := range bundles {
				got[b.Name] = resourceNames(b)
				g.Expect(b.Namespace).To(Equal("fleet-default"))
				g.Expect(b.APIVersion).To(Equal("fleet.cattle.io/v1alpha1"))
				g.Expect(b.Kind).To(Equal("Bundle"))
			}
			g.Expect(got).To(Equal(tt.want))
			g.Expect(bundleNames(bundles)).To(Equal(sorted(bundleNames(bundles))), "sorted by name")
		})
	}
}

func TestReadDir(t *testing.T) {
	g := NewWithT(t)
	root := tree(t, map[string]string{
		"apps/web/fleet.yaml":          "defaultNamespace: web",
		"apps/web/cm.yaml":             cm,
		"apps/web/nested/fleet.yaml":   "",
		"apps/web/nested/cm.yaml":      cm,
		"apps/web/overlays/dev/x.yaml": cm,
	})
	b, err := ReadDir(context.Background(), root, "apps/web", Options{Name: "test"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(b.Name).To(Equal("test-apps-web"))
	g.Expect(b.Spec.DefaultNamespace).To(Equal("web"))
	g.Expect(resourceNames(b)).To(Equal([]string{"cm.yaml", "nested/cm.yaml", "nested/fleet.yaml", "overlays/dev/x.yaml"}),
		"a nested bundle's files ride along, as Fleet ships them")
}

func TestFleetIgnore(t *testing.T) {
	g := NewWithT(t)
	root := tree(t, map[string]string{
		"fleet.yaml": "",
		".fleetignore": strings.Join([]string{
			"# comments and blank lines are skipped",
			"",
			"*.md",
			"!KEEP.md",
			"secrets/",
			"/only-root.yaml",
			"docs/**/draft-*.yaml",
			"tests/*",
		}, "\n"),
		"cm.yaml":                    cm,
		"README.md":                  "x",
		"KEEP.md":                    "kept by negation",
		"sub/NOTES.md":               "x",
		"secrets/s.yaml":             cm,
		"only-root.yaml":             cm,
		"sub/only-root.yaml":         cm,
		"docs/a/b/draft-1.yaml":      cm,
		"docs/a/final.yaml":          cm,
		"nested/.fleetignore":        "local.yaml\n",
		"nested/local.yaml":          cm,
		"nested/kept.yaml":           cm,
		"local.yaml":                 "not ignored: the rule is nested/'s",
		"nested/deeper/local.yaml":   cm,
		"nested/deeper/other.yaml":   cm,
		"nested/deeper/KEEP.md":      "negation applies below",
		"nested/deeper/dropped.md":   "x",
		"nested/deeper/secrets/x.y":  "dir rule applies at any depth",
		"tests/t.yaml":               cm,
		"chart/tests/test-conn.yaml": "Fleet's NAME/* leaves out every directory NAME, at any depth",
		"chart/tests.yaml":           "a file is no directory",
	})
	bundles, err := Read(context.Background(), root, nil, Options{Name: "ig"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bundles).To(HaveLen(1))
	g.Expect(resourceNames(bundles[0])).To(Equal([]string{
		"KEEP.md",
		"chart/tests.yaml",
		"cm.yaml",
		"docs/a/final.yaml",
		"local.yaml",
		"nested/deeper/KEEP.md",
		"nested/deeper/other.yaml",
		"nested/kept.yaml",
		"sub/only-root.yaml",
	}))
}

func TestEncoding(t *testing.T) {
	g := NewWithT(t)
	binary := make([]byte, 4096)
	_, _ = rand.Read(binary)
	binary[0] = 0xff // never valid UTF-8
	large := strings.Repeat("key: value\n", 10000)
	root := tree(t, map[string]string{"cm.yaml": cm, "large.yaml": large, "unicode.txt": "héllo wörld ✓"})
	g.Expect(os.WriteFile(filepath.Join(root, "bin.dat"), binary, 0o644)).To(Succeed())

	bundles, err := Read(context.Background(), root, nil, Options{Name: "enc"})
	g.Expect(err).NotTo(HaveOccurred())
	b := bundles[0]
	enc := map[string]string{}
	for _, r := range b.Spec.Resources {
		enc[r.Name] = r.Encoding
	}
	g.Expect(enc).To(Equal(map[string]string{
		"bin.dat":     EncodingBase64Gz,
		"cm.yaml":     "",
		"large.yaml":  EncodingBase64Gz,
		"unicode.txt": "",
	}))
	g.Expect([]byte(content(t, b, "bin.dat"))).To(Equal(binary))
	g.Expect(content(t, b, "large.yaml")).To(Equal(large))
	g.Expect(content(t, b, "unicode.txt")).To(Equal("héllo wörld ✓"))
	g.Expect(b.Spec.Resources[1].Content).To(Equal(cm), "text stays readable in the Bundle")
}

func TestSymlinks(t *testing.T) {
	g := NewWithT(t)
	outside := tree(t, map[string]string{"secret.txt": "do not read"})
	root := tree(t, map[string]string{
		"shared/common.yaml": cm,
		"app/fleet.yaml":     "",
		"app/cm.yaml":        cm,
	})
	g.Expect(os.Symlink(filepath.Join(root, "shared", "common.yaml"), filepath.Join(root, "app", "common.yaml"))).To(Succeed())
	g.Expect(os.Symlink(filepath.Join(root, "shared"), filepath.Join(root, "app", "shared-dir"))).To(Succeed())

	bundles, err := Read(context.Background(), root, []string{"app"}, Options{Name: "s"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resourceNames(bundles[0])).To(Equal([]string{"cm.yaml", "common.yaml"}), "file links inside the root are followed, directory links are not")
	g.Expect(content(t, bundles[0], "common.yaml")).To(Equal(cm))

	g.Expect(os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(root, "app", "leak.txt"))).To(Succeed())
	_, err = Read(context.Background(), root, []string{"app"}, Options{Name: "s"})
	g.Expect(err).To(MatchError(ContainSubstring("symlink app/leak.txt points outside the repository root")))
	g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonInvalidBundle))

	write(t, root, map[string]string{"app/.fleetignore": "leak.txt\n"})
	_, err = Read(context.Background(), root, []string{"app"}, Options{Name: "s"})
	g.Expect(err).NotTo(HaveOccurred(), "an ignored link is not read")

	g.Expect(os.Symlink(outside, filepath.Join(root, "escape"))).To(Succeed())
	_, err = Read(context.Background(), root, []string{"escape"}, Options{Name: "s"})
	g.Expect(err).To(MatchError(ContainSubstring(`path "escape" leaves the repository root through a symlink`)))
}

func TestErrors(t *testing.T) {
	tests := []struct {
		name    string
		files   map[string]string
		paths   []string
		o       Options
		wantErr []string
	}{
		{
			name:    "path leaving the root",
			files:   map[string]string{"cm.yaml": cm},
			paths:   []string{"../x"},
			wantErr: []string{`path "../x" leaves the repository root`},
		},
		{
			name:    "path hiding .. in the middle",
			files:   map[string]string{"a/cm.yaml": cm},
			paths:   []string{"a/../../x"},
			wantErr: []string{`path "a/../../x" leaves the repository root`},
		},
		{
			name:    "glob leaving the root",
			files:   map[string]string{"cm.yaml": cm},
			paths:   []string{"../*"},
			wantErr: []string{`path "../*" leaves the repository root`},
		},
		{
			name:    "malformed glob",
			files:   map[string]string{"cm.yaml": cm},
			paths:   []string{"a/[x"},
			wantErr: []string{`path "a/[x" is not a valid glob`},
		},
		{
			name:    "malformed fleet.yaml",
			files:   map[string]string{"app/fleet.yaml": "defaultNamespace: a\nhelm:\n  values: [\n"},
			wantErr: []string{"app/fleet.yaml", "line 3", "invalid YAML"},
		},
		{
			name:    "invalid selector",
			files:   map[string]string{"app/fleet.yaml": "defaultNamespace: a\ntargetCustomizations:\n- clusterSelector: {matchLabels: {'a b': c}}\n"},
			wantErr: []string{"app/fleet.yaml", "line 3", "targetCustomizations[0].clusterSelector is not a valid label selector"},
		},
		{
			name:    "both fleet.yaml and fleet.yml",
			files:   map[string]string{"app/fleet.yaml": "", "app/fleet.yml": ""},
			wantErr: []string{"app has both fleet.yaml and fleet.yml"},
		},
		{
			name: "too large",
			files: map[string]string{
				"big/fleet.yaml": "",
				"big/a.yaml":     strings.Repeat("a", 600),
				"big/b.yaml":     strings.Repeat("b", 600),
			},
			o:       Options{MaxResourceBytes: 1000},
			wantErr: []string{`bundle "t-big" in big has 1.2 KiB (1200 bytes) of resources`, "bundle too large for the API server's request limit"},
		},
		{
			name:    "same name twice",
			files:   map[string]string{"a/fleet.yaml": "name: same", "a/cm.yaml": cm, "b/fleet.yaml": "name: same", "b/cm.yaml": cm},
			wantErr: []string{`bundle name "same" is used by both a and b`},
		},
		{
			name:    "missing values file",
			files:   map[string]string{"app/fleet.yaml": "helm:\n  chart: ./chart\n  valuesFiles: [nope.yaml]\n"},
			wantErr: []string{"bundle app", "helm.valuesFiles", "app/nope.yaml does not exist"},
		},
		{
			name:    "values file outside the root",
			files:   map[string]string{"app/fleet.yaml": "helm:\n  chart: ./chart\n  valuesFiles: [../../x.yaml]\n"},
			wantErr: []string{"helm.valuesFiles", "leaves the repository root"},
		},
		{
			name:    "local chart missing",
			files:   map[string]string{"app/fleet.yaml": "helm:\n  chart: ./chart\n"},
			wantErr: []string{"helm.chart", "app/chart does not exist"},
		},
		{
			name:    "invalid name in fleet.yaml",
			files:   map[string]string{"app/fleet.yaml": "name: My_App\n"},
			wantErr: []string{"app/fleet.yaml", `name "My_App" is not a valid bundle name`},
		},
		{
			name:    "bad targetCustomizationMode",
			files:   map[string]string{"app/fleet.yaml": "targetCustomizationMode: Some\n"},
			wantErr: []string{"app/fleet.yaml", `targetCustomizationMode "Some"`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			root := tree(t, tt.files)
			tt.o.Name = "t"
			_, err := Read(context.Background(), root, tt.paths, tt.o)
			g.Expect(err).To(HaveOccurred())
			for _, want := range tt.wantErr {
				g.Expect(err.Error()).To(ContainSubstring(want))
			}
			g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonInvalidBundle), "a user-fixable error: %v", err)
		})
	}
}

func TestCancelled(t *testing.T) {
	g := NewWithT(t)
	root := tree(t, map[string]string{"a/fleet.yaml": "", "a/cm.yaml": cm})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := Read(ctx, root, nil, Options{Name: "c"})
	g.Expect(err).To(MatchError(context.Canceled))
}

func TestOptionsFromFleetYAML(t *testing.T) {
	g := NewWithT(t)
	root := tree(t, map[string]string{
		"app/fleet.yaml": `
name: my-app
labels:
  team: blue
defaultNamespace: apps
namespace: forced
keepResources: true
createNamespace: true
namespaceLabels: {env: prod}
correctDrift:
  enabled: true
  force: true
diff:
  comparePatches:
  - apiVersion: apps/v1
    kind: Deployment
    name: web
    namespace: apps
    jsonPointers: ["/spec/replicas"]
    operations:
    - {op: remove, path: /spec/template/metadata/annotations}
ignore:
  conditions:
  - type: Progressing
kustomize:
  dir: overlays/prod
yaml:
  overlays: [dev]
helm:
  releaseName: web
  timeoutSeconds: 300
  atomic: true
  values:
    replicas: 2
    image: {tag: "1.0"}
dependsOn:
- name: base
- selector:
    matchLabels: {tier: db}
  acceptedStates: [Ready, Modified]
paused: true
rolloutStrategy:
  maxUnavailable: 10%
  autoPartitionSize: 5
  partitions:
  - name: canary
    clusterGroup: canary
targetCustomizationMode: AllMatches
targetCustomizations:
- name: prod
  clusterSelector:
    matchLabels: {env: prod}
  helm:
    values:
      replicas: 5
- name: skip
  clusterName: old
  doNotDeploy: true
`,
		"app/overlays/dev/cm.yaml":               cm,
		"app/overlays/prod/kustomization.yaml":   "resources: []",
		"app/Chart.yaml":                         "name: web\nversion: 1.0.0\n",
		"app/templates/deploy.yaml":              cm,
		"app/overlays/dev/deployment_patch.yaml": cm,
	})
	bundles, err := Read(context.Background(), root, nil, Options{
		Name:      "repo",
		Namespace: "fleet-default",
		Labels:    map[string]string{fleet.RepoLabel: "repo", "team": "from-repo-wins"},
		Commit:    "abc123",
		// A GitRepo without targets, as the GitRepo controller passes it.
		TargetsFromRepo: RepoTargets(nil),
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bundles).To(HaveLen(1))
	b := bundles[0]
	g.Expect(b.Name).To(Equal("my-app"))
	g.Expect(b.Labels).To(Equal(map[string]string{"team": "from-repo-wins", fleet.RepoLabel: "repo", fleet.CommitLabel: "abc123"}))
	s := b.Spec
	g.Expect(s.DefaultNamespace).To(Equal("apps"))
	g.Expect(s.TargetNamespace).To(Equal("forced"))
	g.Expect(s.KeepResources).To(BeTrue())
	g.Expect(s.CreateNamespace).To(HaveValue(BeTrue()))
	g.Expect(s.NamespaceLabels).To(Equal(map[string]string{"env": "prod"}))
	g.Expect(s.CorrectDrift).To(Equal(&fleet.CorrectDrift{Enabled: true, Force: true}))
	g.Expect(s.Diff.ComparePatches).To(Equal([]fleet.ComparePatch{{
		APIVersion: "apps/v1", Kind: "Deployment", Name: "web", Namespace: "apps",
		JSONPointers: []string{"/spec/replicas"},
		Operations:   []fleet.Operation{{Op: "remove", Path: "/spec/template/metadata/annotations"}},
	}}))
	g.Expect(s.Ignore.Conditions).To(Equal([]map[string]string{{"type": "Progressing"}}))
	g.Expect(s.Kustomize.Dir).To(Equal("overlays/prod"))
	g.Expect(s.YAML.Overlays).To(Equal([]string{"dev"}))
	g.Expect(s.Helm.ReleaseName).To(Equal("web"))
	g.Expect(s.Helm.TimeoutSeconds).To(Equal(300))
	g.Expect(s.Helm.Atomic).To(BeTrue())
	g.Expect(s.Helm.Values.Data).To(Equal(map[string]interface{}{"replicas": float64(2), "image": map[string]interface{}{"tag": "1.0"}}))
	g.Expect(s.DependsOn).To(Equal([]fleet.BundleRef{
		{Name: "base"},
		{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "db"}}, AcceptedStates: []fleet.BundleState{fleet.Ready, fleet.Modified}},
	}))
	g.Expect(s.Paused).To(BeTrue())
	g.Expect(s.RolloutStrategy.MaxUnavailable.String()).To(Equal("10%"))
	g.Expect(s.RolloutStrategy.AutoPartitionSize.IntValue()).To(Equal(5))
	g.Expect(s.RolloutStrategy.Partitions).To(Equal([]fleet.Partition{{Name: "canary", ClusterGroup: "canary"}}))
	g.Expect(s.TargetCustomizationMode).To(Equal(fleet.AllMatches))
	g.Expect(s.Targets).To(HaveLen(3))
	g.Expect(s.Targets[2]).To(Equal(fleet.BundleTarget{Name: "default", ClusterGroup: "default"}), "the GitRepo's default target follows the customizations")
	g.Expect(s.Targets[0].Name).To(Equal("prod"))
	g.Expect(s.Targets[0].Helm.Values.Data).To(Equal(map[string]interface{}{"replicas": float64(5)}))
	g.Expect(s.Targets[1]).To(Equal(fleet.BundleTarget{Name: "skip", ClusterName: "old", DoNotDeploy: true}))
	g.Expect(s.TargetRestrictions).To(Equal([]fleet.BundleTargetRestriction{{Name: "default", ClusterGroup: "default"}}),
		"as in Fleet, the GitRepo's default target restricts the bundle too")
	g.Expect(resourceNames(b)).To(Equal([]string{
		"Chart.yaml", "overlays/dev/cm.yaml", "overlays/dev/deployment_patch.yaml", "overlays/prod/kustomization.yaml", "templates/deploy.yaml",
	}))
}

func TestTargets(t *testing.T) {
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	repoTargets := []fleet.GitTarget{{Name: "prod", ClusterSelector: selector}, {ClusterGroup: "edge"}}
	tests := []struct {
		name             string
		fleetYAML        string
		o                Options
		wantTargets      []fleet.BundleTarget
		wantRestrictions []fleet.BundleTargetRestriction
		wantMode         fleet.TargetCustomizationMode
	}{
		{
			name:        "neither fleet.yaml nor the GitRepo: the default target",
			wantTargets: []fleet.BundleTarget{{Name: "default", ClusterGroup: "default"}},
		},
		{
			name: "GitRepo targets become targets and restrictions",
			o:    Options{TargetsFromRepo: repoTargets},
			wantTargets: []fleet.BundleTarget{
				{Name: "prod", ClusterSelector: selector},
				{ClusterGroup: "edge"},
			},
			wantRestrictions: []fleet.BundleTargetRestriction{
				{Name: "prod", ClusterSelector: selector},
				{ClusterGroup: "edge"},
			},
		},
		{
			name:      "targetCustomizations come before the GitRepo targets",
			fleetYAML: "targetCustomizations:\n- name: big\n  clusterName: big\n  helm: {values: {size: 3}}\n",
			o:         Options{TargetsFromRepo: repoTargets},
			wantTargets: []fleet.BundleTarget{
				{Name: "big", ClusterName: "big", BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]interface{}{"size": float64(3)}}}}},
				{Name: "prod", ClusterSelector: selector},
				{ClusterGroup: "edge"},
			},
			wantRestrictions: []fleet.BundleTargetRestriction{
				{Name: "prod", ClusterSelector: selector},
				{ClusterGroup: "edge"},
			},
		},
		{
			name:             "overrideTargets replace the GitRepo's targets, after the customizations",
			fleetYAML:        "targetCustomizations:\n- {name: big, clusterName: big}\noverrideTargets:\n- {name: only, clusterName: one}\n",
			o:                Options{TargetsFromRepo: repoTargets},
			wantTargets:      []fleet.BundleTarget{{Name: "big", ClusterName: "big"}, {Name: "only", ClusterName: "one"}},
			wantRestrictions: []fleet.BundleTargetRestriction{{Name: "only", ClusterName: "one"}},
		},
		{
			name:        "the mode is kept as written, empty when unset",
			fleetYAML:   "targetCustomizationMode: FirstMatch\n",
			wantTargets: []fleet.BundleTarget{{Name: "default", ClusterGroup: "default"}},
			wantMode:    fleet.FirstMatch,
		},
		{
			name:      "GitRepo namespace and service account are forced on targets that set their own",
			fleetYAML: "targetCustomizations:\n- {name: a, clusterName: a, namespace: mine, serviceAccount: admin}\n- {name: b, clusterName: b}\n",
			o:         Options{TargetNamespace: "ns", ServiceAccount: "sa"},
			wantTargets: []fleet.BundleTarget{
				{Name: "a", ClusterName: "a", BundleDeploymentOptions: fleet.BundleDeploymentOptions{TargetNamespace: "ns", ServiceAccount: "sa"}},
				{Name: "b", ClusterName: "b"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			root := tree(t, map[string]string{"app/fleet.yaml": tt.fleetYAML, "app/cm.yaml": cm})
			tt.o.Name = "t"
			bundles, err := Read(context.Background(), root, nil, tt.o)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(bundles[0].Spec.Targets).To(Equal(tt.wantTargets))
			g.Expect(bundles[0].Spec.TargetRestrictions).To(Equal(tt.wantRestrictions))
			g.Expect(bundles[0].Spec.TargetCustomizationMode).To(Equal(tt.wantMode))
		})
	}
}

func TestRepoOptions(t *testing.T) {
	g := NewWithT(t)
	root := tree(t, map[string]string{
		"plain/fleet.yaml": "",
		"plain/cm.yaml":    cm,
		"own/fleet.yaml":   "namespace: own\nserviceAccount: own\ncorrectDrift: {enabled: false}\nforceSyncGeneration: 1\n",
		"own/cm.yaml":      cm,
	})
	drift := &fleet.CorrectDrift{Enabled: true, KeepFailHistory: true}
	selector := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	o := Options{
		Name: "r", TargetNamespace: "tns", ServiceAccount: "tsa", KeepResources: true, DeleteNamespace: true,
		CorrectDrift: drift, ForceSyncGeneration: 7, AllowedTargetNamespaceSelector: selector,
	}
	bundles, err := Read(context.Background(), root, nil, o)
	g.Expect(err).NotTo(HaveOccurred())
	for _, b := range bundles {
		s := b.Spec
		g.Expect(s.TargetNamespace).To(Equal("tns"), b.Name)
		g.Expect(s.ServiceAccount).To(Equal("tsa"), b.Name)
		g.Expect(s.KeepResources).To(BeTrue(), b.Name)
		g.Expect(s.DeleteNamespace).To(BeTrue(), b.Name)
		g.Expect(s.CorrectDrift).To(Equal(drift), b.Name)
		g.Expect(s.CorrectDrift).NotTo(BeIdenticalTo(drift), "copied, not shared")
		g.Expect(s.ForceSyncGeneration).To(Equal(int64(7)), b.Name)
		g.Expect(s.AllowedTargetNamespaceSelector).To(Equal(selector), "the restrictions' selector, for the agent: %s", b.Name)
		g.Expect(s.AllowedTargetNamespaceSelector).NotTo(BeIdenticalTo(selector), "copied, not shared")
	}

	// Unset GitRepo options leave fleet.yaml's alone, but for
	// forceSyncGeneration, which is the GitRepo's alone (as in Fleet).
	bundles, err = Read(context.Background(), root, []string{"own"}, Options{Name: "r"})
	g.Expect(err).NotTo(HaveOccurred())
	s := bundles[0].Spec
	g.Expect(s.TargetNamespace).To(Equal("own"))
	g.Expect(s.ServiceAccount).To(Equal("own"))
	g.Expect(s.CorrectDrift).To(Equal(&fleet.CorrectDrift{}))
	g.Expect(s.ForceSyncGeneration).To(BeZero())
	g.Expect(bundles[0].Labels).To(BeNil())

	// A GitRepo's correctDrift that is not enabled leaves a fleet.yaml's
	// (Fleet overrides it only when enabled).
	root = tree(t, map[string]string{
		"drift/fleet.yaml": "correctDrift: {enabled: true, force: true}\n",
		"drift/cm.yaml":    cm,
	})
	for _, repo := range []*fleet.CorrectDrift{{}, {Force: true}} {
		bundles, err = Read(context.Background(), root, nil, Options{Name: "r", CorrectDrift: repo})
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(bundles[0].Spec.CorrectDrift).To(Equal(&fleet.CorrectDrift{Enabled: true, Force: true}), "GitRepo correctDrift %+v", *repo)
	}
}

func TestValuesFiles(t *testing.T) {
	g := NewWithT(t)
	root := tree(t, map[string]string{
		"app/fleet.yaml": `
helm:
  chart: ./chart
  valuesFiles: [values/base.yaml, values/prod.yaml, ../shared/extra.yaml]
  values:
    image: {tag: inline}
targetCustomizations:
- name: eu
  clusterSelector: {matchLabels: {region: eu}}
  helm:
    valuesFiles: [values/eu.yaml]
    values: {region: inline-eu}
`,
		"app/chart/Chart.yaml":       "apiVersion: v2\nname: c\nversion: 0.1.0\n",
		"app/chart/templates/x.yaml": cm,
		"app/values/base.yaml":       "replicas: 1\nimage: {repo: nginx, tag: base}\nlist: [1, 2]\n",
		"app/values/prod.yaml":       "replicas: 3\nimage: {tag: prod}\nlist: [3]\n",
		"app/values/eu.yaml":         "region: eu\nzone: a\n",
		"shared/extra.yaml":          "extra: true\n",
	})
	bundles, err := Read(context.Background(), root, []string{"app"}, Options{Name: "v"})
	g.Expect(err).NotTo(HaveOccurred())
	h := bundles[0].Spec.Helm
	g.Expect(h.Chart).To(Equal("./chart"))
	g.Expect(h.ValuesFiles).To(Equal([]string{"values/base.yaml", "values/prod.yaml", "../shared/extra.yaml"}), "kept as written, as in Fleet's Bundle")
	g.Expect(h.Values.Data).To(Equal(map[string]interface{}{
		"replicas": float64(3),
		"image":    map[string]interface{}{"repo": "nginx", "tag": "prod"},
		"list":     []interface{}{float64(3)},
		"extra":    true,
	}))
	th := bundles[0].Spec.Targets[0].Helm
	g.Expect(th.ValuesFiles).To(Equal([]string{"values/eu.yaml"}))
	g.Expect(th.Values.Data).To(Equal(map[string]interface{}{"region": "eu", "zone": "a"}))
	g.Expect(resourceNames(bundles[0])).To(Equal([]string{"chart/Chart.yaml", "chart/templates/x.yaml"}), "values files configure the bundle; they are not resources")
}

// As in Fleet, helm.valuesFiles of a bundle without a chart are not read
// (a missing one is no error) but still left out of the resources, by path
// and by base name; those of a target are read.
func TestValuesFilesWithoutChart(t *testing.T) {
	g := NewWithT(t)
	root := tree(t, map[string]string{
		"app/fleet.yaml": "helm:\n  valuesFiles: [sub/values.yaml, missing.yaml]\n" +
			"targetCustomizations:\n- name: t\n  helm:\n    valuesFiles: [t.yaml]\n",
		"app/values.yaml":              "left: out\n",
		"app/t.yaml":                   "target: read\n",
		"app/templates/cm.yaml":        cm,
		"app/sub/values.yaml":          "left: out\n",
		"app/sub/values-too.yaml":      "kept: true\n",
		"app/other/values.yaml":        "kept: true\n",
		"app/other/nested/values.yaml": "kept: true\n",
	})
	bundles, err := Read(context.Background(), root, []string{"app"}, Options{Name: "v"})
	g.Expect(err).NotTo(HaveOccurred())
	h := bundles[0].Spec.Helm
	g.Expect(h.Values).To(BeNil())
	g.Expect(h.ValuesFiles).To(Equal([]string{"sub/values.yaml", "missing.yaml"}))
	g.Expect(bundles[0].Spec.Targets[0].Helm.Values.Data).To(Equal(map[string]interface{}{"target": "read"}))
	g.Expect(resourceNames(bundles[0])).To(Equal([]string{
		"other/nested/values.yaml", "other/values.yaml", "sub/values-too.yaml", "templates/cm.yaml"}))
}

func TestEncodeDecodeResource(t *testing.T) {
	tests := []struct {
		name     string
		data     []byte
		encoding string
	}{
		{"text", []byte(cm), ""},
		{"empty", []byte{}, ""},
		{"binary", []byte{0x00, 0xff, 0xfe, 0x80}, EncodingBase64Gz},
		{"large text", bytes.Repeat([]byte("x"), compressAbove+1), EncodingBase64Gz},
		{"at the limit", bytes.Repeat([]byte("x"), compressAbove), ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r, err := EncodeResource("f", tt.data)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(r.Encoding).To(Equal(tt.encoding))
			back, err := DecodeResource(r)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(back).To(Equal(tt.data))
		})
	}
	_, err := DecodeResource(fleet.BundleResource{Name: "f", Encoding: "zip"})
	NewWithT(t).Expect(err).To(MatchError(ContainSubstring(`unknown encoding "zip"`)))
}

// A repository's links to devices or huge files must not exhaust the
// manager: every file read on its own is a regular file under a cap.
func TestFilesReadOnTheirOwnAreBounded(t *testing.T) {
	cases := map[string]struct {
		files   map[string]string
		link    string // name linked to /dev/zero
		wantErr string
	}{
		"fleetignore to /dev/zero": {files: map[string]string{"cm.yaml": "a: 1"}, link: ".fleetignore", wantErr: "points outside the repository root"},
		"valuesFiles to /dev/zero": {files: map[string]string{"fleet.yaml": "helm:\n  chart: c\n  valuesFiles: [v.yaml]\n", "cm.yaml": "a: 1"}, link: "v.yaml", wantErr: "points outside the repository root"},
		"fleet.yaml too large":     {files: map[string]string{"fleet.yaml": "# " + strings.Repeat("x", 4096) + "\n", "cm.yaml": "a: 1"}, wantErr: "more than the limit"},
		"valuesFiles a directory":  {files: map[string]string{"fleet.yaml": "helm:\n  chart: c\n  valuesFiles: [v]\n", "v/x": "1"}, wantErr: "not a regular file"},
		"fleetignore a directory":  {files: map[string]string{"cm.yaml": "a: 1", ".fleetignore/x": "1"}, wantErr: "not a regular file"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			root := tree(t, c.files)
			if c.link != "" {
				g.Expect(os.Symlink("/dev/zero", filepath.Join(root, c.link))).To(Succeed())
			}
			_, err := Read(context.Background(), root, nil, Options{Name: "b", MaxFileBytes: 1024})
			g.Expect(err).To(MatchError(ContainSubstring(c.wantErr)))
			g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonInvalidBundle))
		})
	}
}

func TestMaxBundles(t *testing.T) {
	g := NewWithT(t)
	root := tree(t, map[string]string{"a/fleet.yaml": "", "a/cm.yaml": cm, "b/fleet.yaml": "", "b/cm.yaml": cm, "c/fleet.yaml": "", "c/cm.yaml": cm})
	_, err := Read(context.Background(), root, nil, Options{Name: "m", MaxBundles: 2})
	g.Expect(err).To(MatchError(ContainSubstring("3 bundle directories found, more than the limit of 2")))
	bs, err := Read(context.Background(), root, nil, Options{Name: "m", MaxBundles: 3})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bs).To(HaveLen(3))
}
