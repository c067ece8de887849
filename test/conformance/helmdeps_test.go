package conformance_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"io"
	"net/http/httptest"
	"testing"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart/loader"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/test/chartrepo"
)

// A local chart's dependencies, as Fleet builds the bundle: Fleet's
// bundlereader runs `helm dependency update` on every chart directory whose
// Chart.yaml lists dependencies missing from charts/ (internal/helmupdater),
// so the Bundle carries charts/<name>-<version>.tgz and the Chart.lock helm
// writes; fleet.yaml's helm.disableDependencyUpdate skips that (and the
// option rides along in the Bundle's spec); a dependency helm cannot fetch
// fails `fleet apply`.
func TestHelmChartDependencies(t *testing.T) {
	charts, err := chartrepo.New([]chartrepo.Chart{
		{Name: "redis", Version: "1.0.0", Templates: map[string]string{"svc.yaml": "apiVersion: v1\nkind: Service\nmetadata:\n  name: redis\n"}},
		{Name: "redis", Version: "1.1.0", Templates: map[string]string{"svc.yaml": "apiVersion: v1\nkind: Service\nmetadata:\n  name: redis\n"}},
	}, chartrepo.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(charts.Close)
	closed := httptest.NewServer(nil)
	closed.Close()

	chartYAML := func(url string) string {
		return "apiVersion: v2\nname: app\nversion: 0.1.0\ndependencies:\n- name: redis\n  version: ^1.0.0\n  repository: " + url + "\n"
	}
	template := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n"

	cases := []struct {
		name          string
		files         map[string]string
		wantResources []string
		wantSubchart  string // version of redis the chart carries; "" for none
		wantDisabled  bool   // spec.helm.disableDependencyUpdate
		wantErr       []string
	}{{
		name:          "the dependency is fetched into charts/ with a Chart.lock",
		files:         map[string]string{"app/Chart.yaml": chartYAML(charts.URL), "app/templates/cm.yaml": template},
		wantResources: []string{"Chart.lock", "Chart.yaml", "charts/redis-1.1.0.tgz", "templates/cm.yaml"},
		wantSubchart:  "1.1.0",
	}, {
		name: "disableDependencyUpdate leaves it out",
		files: map[string]string{
			"app/fleet.yaml":        "helm:\n  disableDependencyUpdate: true\n",
			"app/Chart.yaml":        chartYAML(charts.URL),
			"app/templates/cm.yaml": template,
		},
		wantResources: []string{"Chart.yaml", "templates/cm.yaml"},
		wantDisabled:  true,
	}, {
		name:    "an unreachable dependency fails, naming it and its repository",
		files:   map[string]string{"app/Chart.yaml": chartYAML(closed.URL), "app/templates/cm.yaml": template},
		wantErr: []string{"dependency redis ^1.0.0 from " + closed.URL, "connection refused"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := apply(t, repo(t, tc.files), "deps", "app")
			if tc.wantErr != nil {
				g.Expect(got.Err).To(HaveOccurred())
				for _, w := range tc.wantErr {
					g.Expect(got.Err.Error()).To(ContainSubstring(w))
				}
				g.Expect(got.Bundles).To(BeEmpty(), "no Bundle without its subcharts")
				return
			}
			g.Expect(got.Err).NotTo(HaveOccurred())
			b := got.byName(t, "deps-app")
			g.Expect(resourceNames(b)).To(Equal(tc.wantResources))
			g.Expect(b.Spec.Helm != nil && b.Spec.Helm.DisableDependencyUpdate).To(Equal(tc.wantDisabled))

			files := map[string][]byte{}
			for _, r := range b.Spec.Resources {
				files[r.Name] = decode(t, r)
			}
			var buffered []*loader.BufferedFile
			for name, data := range files {
				buffered = append(buffered, &loader.BufferedFile{Name: name, Data: data})
			}
			ch, err := loader.LoadFiles(buffered)
			g.Expect(err).NotTo(HaveOccurred())
			var sub []string
			for _, d := range ch.Dependencies() {
				sub = append(sub, d.Name()+"@"+d.Metadata.Version)
			}
			if tc.wantSubchart == "" {
				g.Expect(sub).To(BeEmpty())
				return
			}
			g.Expect(sub).To(Equal([]string{"redis@" + tc.wantSubchart}))
			g.Expect(string(files["Chart.lock"])).To(ContainSubstring("repository: " + charts.URL))
			g.Expect(string(files["Chart.lock"])).To(ContainSubstring("version: " + tc.wantSubchart))
		})
	}
}

// decode returns a resource's bytes.
func decode(t *testing.T, r fleet.BundleResource) []byte {
	t.Helper()
	if r.Encoding == "" {
		return []byte(r.Content)
	}
	raw, err := base64.StdEncoding.DecodeString(r.Content)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
