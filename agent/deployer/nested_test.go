package deployer

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/internal/bundlereader"
)

// A repository is read into Bundles as the manager reads it
// (bundlereader.Read), then each Bundle is deployed as the agent deploys it,
// into a real API server: the objects are those Fleet deploys from the same
// repository. A sub-directory with a fleet.yaml of its own rides along in
// its parent's resources (as Fleet ships it): its manifests are deployed by
// its own bundle only, but a kustomization of the parent may use its files;
// a chart's .helmignore leaves nothing out, as Helm reads none when it loads
// a chart from files; helm.valuesFiles beside the chart are the values.
func TestRepositoryDeploysAsFleetDoes(t *testing.T) {
	c, err := controlPlane(t).Client(clientgoscheme.Scheme)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	d, err := New(controlPlane(t).Config, c, "cluster-ns")
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	cm := func(name string) string {
		return "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\ndata: {k: v}\n"
	}

	cases := []struct {
		name  string
		files map[string]string
		// want: namespace -> release (bundle) name -> ConfigMap names
		want map[string]map[string][]string
		data map[string]map[string]string // "namespace/name" -> data
	}{{
		// Fleet's nested_mixed_two_levels (directories in lower case, which
		// keeps the names free of hashes), with a namespace for the root.
		name: "nested fleet.yaml directories deploy with their own bundle only",
		files: map[string]string{
			"fleet.yaml":                      "defaultNamespace: nested-root\n",
			"nested/deploymenta/fleet.yaml":   "namespace: nested-a\n",
			"nested/deploymenta/cm.yaml":      cm("a"),
			"nested/deploymentb/cm.yaml":      cm("b"),
			"nested/deploymentc/fleet.yaml":   "namespace: nested-c\n",
			"nested/deploymentc/cm.yaml":      cm("c"),
			"nested/deploymentc/deep/x.yaml":  cm("c-deep"),
			"nested/deploymentd/cm.yaml":      cm("d"),
			"nested/deploymentd/values.json":  `{"not": "an object"}`,
			"nested/deploymentd/notes/README": "not a manifest",
		},
		want: map[string]map[string][]string{
			"nested-root": {"nested": {"b", "d"}},
			"nested-a":    {"nested-nested-deploymenta": {"a"}},
			"nested-c":    {"nested-nested-deploymentc": {"c", "c-deep"}},
		},
	}, {
		// The root kustomization names a file of a nested bundle: Fleet
		// ships it in the root bundle, so the build finds it.
		name: "a kustomization uses the files of a nested bundle",
		files: map[string]string{
			"fleet.yaml":         "defaultNamespace: kust-root\n",
			"kustomization.yaml": "resources: [app/cm.yaml, own.yaml]\n",
			"own.yaml":           cm("own"),
			"app/fleet.yaml":     "namespace: kust-app\n",
			"app/cm.yaml":        cm("shared"),
		},
		want: map[string]map[string][]string{
			"kust-root": {"nested": {"own", "shared"}},
			"kust-app":  {"nested-app": {"shared"}},
		},
	}, {
		name: "a chart's .helmignore leaves nothing out; its valuesFiles are the values",
		files: map[string]string{
			"fleet.yaml":                 "defaultNamespace: helmignore\nhelm:\n  chart: ./chart\n  valuesFiles: [chart/values-prod.yaml]\n",
			"chart/Chart.yaml":           "apiVersion: v2\nname: web\nversion: 0.1.0\n",
			"chart/.helmignore":          "templates/extra.yaml\nvalues-*.yaml\n",
			"chart/values.yaml":          "env: default\n",
			"chart/values-prod.yaml":     "env: prod\n",
			"chart/templates/main.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: main}\ndata: {env: {{ .Values.env | quote }}}\n",
			"chart/templates/extra.yaml": cm("extra"),
		},
		want: map[string]map[string][]string{"helmignore": {"nested": {"extra", "main"}}},
		data: map[string]map[string]string{"helmignore/main": {"env": "prod"}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			root := t.TempDir()
			for name, content := range tc.files {
				p := filepath.Join(root, filepath.FromSlash(name))
				g.Expect(os.MkdirAll(filepath.Dir(p), 0o755)).To(Succeed())
				g.Expect(os.WriteFile(p, []byte(content), 0o644)).To(Succeed())
			}
			bundles, err := bundlereader.Read(t.Context(), root, nil, bundlereader.Options{Name: "nested"})
			g.Expect(err).NotTo(HaveOccurred())
			for _, b := range bundles {
				files, err := FilesOf(b.Spec.Resources)
				g.Expect(err).NotTo(HaveOccurred())
				_, err = d.Deploy(t.Context(), Input{Name: b.Name, DeploymentID: "1", Options: b.Spec.BundleDeploymentOptions, Files: files})
				g.Expect(err).NotTo(HaveOccurred(), "deploying bundle %s", b.Name)
			}
			for ns, releases := range tc.want {
				var list corev1.ConfigMapList
				g.Expect(c.List(t.Context(), &list, client.InNamespace(ns))).To(Succeed())
				got := map[string][]string{}
				for _, o := range list.Items {
					if rel := o.Annotations["meta.helm.sh/release-name"]; rel != "" {
						got[rel] = append(got[rel], o.Name)
					}
				}
				for rel := range got {
					sort.Strings(got[rel])
				}
				g.Expect(got).To(Equal(releases), "ConfigMaps of namespace %s by release", ns)
			}
			for key, want := range tc.data {
				ns, name := filepath.Split(key)
				var o corev1.ConfigMap
				g.Expect(c.Get(t.Context(), client.ObjectKey{Namespace: filepath.Clean(ns), Name: name}, &o)).To(Succeed())
				g.Expect(o.Data).To(Equal(want))
			}
		})
	}
}
