package bundlereader

import (
	"context"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"
	"sigs.k8s.io/yaml"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// chartWithDeps is a Chart.yaml depending on the charts deps lists
// (name, version constraint, repository), REPO standing for url when it is
// given.
func chartWithDeps(url string, deps ...[3]string) string {
	var b strings.Builder
	b.WriteString("apiVersion: v2\nname: app\nversion: 0.1.0\ndependencies:\n")
	for _, d := range deps {
		repo := d[2]
		if url != "" {
			repo = strings.ReplaceAll(repo, "REPO", url)
		}
		b.WriteString("- name: " + d[0] + "\n  version: \"" + d[1] + "\"\n  repository: \"" + repo + "\"\n")
	}
	return b.String()
}

const appTemplate = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\n"

// Fleet runs `helm dependency update` on each chart directory whose
// Chart.yaml lists dependencies missing from charts/ (internal/helmupdater,
// called from bundlereader's GetContent), unless
// helm.disableDependencyUpdate: the bundle then carries
// charts/<name>-<version>.tgz and the Chart.lock helm writes.
func TestChartDependencies(t *testing.T) {
	deps := newChartRepo(t, map[string][]string{"redis": {"1.0.0", "1.1.0", "2.0.0"}, "common": {"0.1.0"}}, false)
	closed := httptest.NewServer(nil)
	closed.Close() // nothing listens there any more

	tests := []struct {
		name      string
		files     map[string]string // REPO stands for the repository URL, CLOSED for a closed port
		chartDir  string            // where the bundle's chart is
		wantFiles []string          // below chartDir
		wantDeps  map[string]string // subchart name -> version, as the agent loads the chart
		wantLock  map[string]string // Chart.lock: name -> version
		wantErr   []string
		stall     bool // the error is for a person to fix
	}{{
		name: "a dependency is fetched into charts/ at the newest version allowed",
		files: map[string]string{
			"app/Chart.yaml":        chartWithDeps("", [3]string{"redis", "^1.0.0", "REPO"}),
			"app/templates/cm.yaml": appTemplate,
		},
		wantFiles: []string{"Chart.lock", "Chart.yaml", "charts/redis-1.1.0.tgz", "templates/cm.yaml"},
		wantDeps:  map[string]string{"redis": "1.1.0"},
		wantLock:  map[string]string{"redis": "1.1.0"},
	}, {
		name: "a chart below helm.chart gets its dependencies there",
		files: map[string]string{
			"app/fleet.yaml":              "helm:\n  chart: ./chart\n",
			"app/chart/Chart.yaml":        chartWithDeps("", [3]string{"redis", "2.0.0", "REPO/"}, [3]string{"common", "*", "REPO"}),
			"app/chart/templates/cm.yaml": appTemplate,
		},
		chartDir:  "chart",
		wantFiles: []string{"Chart.lock", "Chart.yaml", "charts/common-0.1.0.tgz", "charts/redis-2.0.0.tgz", "templates/cm.yaml"},
		wantDeps:  map[string]string{"redis": "2.0.0", "common": "0.1.0"},
		wantLock:  map[string]string{"redis": "2.0.0", "common": "0.1.0"},
	}, {
		name: "disableDependencyUpdate leaves charts/ as it is",
		files: map[string]string{
			"app/fleet.yaml":        "helm:\n  disableDependencyUpdate: true\n",
			"app/Chart.yaml":        chartWithDeps("", [3]string{"redis", "^1.0.0", "REPO"}),
			"app/templates/cm.yaml": appTemplate,
		},
		wantFiles: []string{"Chart.yaml", "templates/cm.yaml"},
		wantDeps:  map[string]string{},
	}, {
		name: "a vendored dependency is not fetched again",
		files: map[string]string{
			"app/Chart.yaml":               chartWithDeps("", [3]string{"redis", "^1.0.0", "REPO"}),
			"app/charts/redis/Chart.yaml":  "apiVersion: v2\nname: redis\nversion: 1.0.0\n",
			"app/charts/redis/values.yaml": "vendored: true\n",
		},
		wantFiles: []string{"Chart.yaml", "charts/redis/Chart.yaml", "charts/redis/values.yaml"},
		wantDeps:  map[string]string{"redis": "1.0.0"},
	}, {
		name: "a file:// dependency elsewhere in the repository is packaged",
		files: map[string]string{
			"app/Chart.yaml":        chartWithDeps("", [3]string{"lib", "~0.3", "file://../lib"}, [3]string{"redis", "1.0.0", "REPO"}),
			"lib/Chart.yaml":        "apiVersion: v2\nname: lib\nversion: 0.3.1\n",
			"lib/templates/lib.tpl": "{{- define \"lib.name\" -}}lib{{- end -}}\n",
		},
		wantFiles: []string{"Chart.lock", "Chart.yaml", "charts/lib-0.3.1.tgz", "charts/redis-1.0.0.tgz"},
		wantDeps:  map[string]string{"lib": "0.3.1", "redis": "1.0.0"},
		wantLock:  map[string]string{"lib": "0.3.1", "redis": "1.0.0"},
	}, {
		name: "an outdated archive in charts/ is replaced",
		files: map[string]string{
			"app/Chart.yaml": chartWithDeps("", [3]string{"redis", "2.0.0", "REPO"}, [3]string{"common", "0.1.0", "REPO"}),
			// common 0.1.0 is there, redis is not: the update runs, and
			// fetches both, as helm does.
			"app/charts/common-0.1.0.tgz": "", // replaced below by a real archive
		},
		wantFiles: []string{"Chart.lock", "Chart.yaml", "charts/common-0.1.0.tgz", "charts/redis-2.0.0.tgz"},
		wantDeps:  map[string]string{"redis": "2.0.0", "common": "0.1.0"},
		wantLock:  map[string]string{"redis": "2.0.0", "common": "0.1.0"},
	}, {
		name:    "an unreachable repository fails, naming the dependency and the repository",
		files:   map[string]string{"app/Chart.yaml": chartWithDeps("", [3]string{"redis", "^1.0.0", "CLOSED"})},
		wantErr: []string{"chart app: fetching dependency redis ^1.0.0 from CLOSED", "connection refused"},
	}, {
		name:    "a version the repository does not have",
		files:   map[string]string{"app/Chart.yaml": chartWithDeps("", [3]string{"redis", "^3.0.0", "REPO"})},
		wantErr: []string{"chart app: fetching dependency redis ^3.0.0 from REPO", "chart redis version ^3.0.0 not found in REPO"},
		stall:   true,
	}, {
		name:    "a repository name instead of a URL",
		files:   map[string]string{"app/Chart.yaml": chartWithDeps("", [3]string{"redis", "^1.0.0", "@bitnami"})},
		wantErr: []string{`dependency redis: repository "@bitnami" is the name of a repository`, "give its URL"},
		stall:   true,
	}, {
		name:    "no repository and not in charts/",
		files:   map[string]string{"app/Chart.yaml": chartWithDeps("", [3]string{"redis", "^1.0.0", ""})},
		wantErr: []string{"dependency redis declares no repository and is not in charts/redis"},
		stall:   true,
	}, {
		name:    "a file:// dependency outside the repository",
		files:   map[string]string{"app/Chart.yaml": chartWithDeps("", [3]string{"lib", "*", "file://../../lib"})},
		wantErr: []string{"dependency lib: repository file://../../lib", "leaves the repository root"},
		stall:   true,
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			files := map[string]string{}
			for k, v := range tt.files {
				files[k] = strings.NewReplacer("REPO", deps.URL, "CLOSED", closed.URL).Replace(v)
			}
			root := tree(t, files)
			if _, ok := files["app/charts/common-0.1.0.tgz"]; ok {
				// A real, different archive of common 0.1.0, which the
				// update replaces, and one of a chart no longer wanted,
				// which goes.
				for _, md := range []*chart.Metadata{
					{APIVersion: chart.APIVersionV2, Name: "common", Version: "0.1.0", Description: "stale"},
					{APIVersion: chart.APIVersionV2, Name: "gone", Version: "1.0.0"},
				} {
					data, err := packageChart(&chart.Chart{Metadata: md})
					g.Expect(err).NotTo(HaveOccurred())
					write(t, root, map[string]string{"app/charts/" + md.Name + "-" + md.Version + ".tgz": string(data)})
				}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			bundles, err := Read(ctx, root, []string{"app"}, Options{Name: "deps"})
			if tt.wantErr != nil {
				g.Expect(err).To(HaveOccurred())
				for _, w := range tt.wantErr {
					g.Expect(err.Error()).To(ContainSubstring(strings.NewReplacer("REPO", deps.URL, "CLOSED", closed.URL).Replace(w)))
				}
				if tt.stall {
					g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonInvalidBundle), "stalls: %v", err)
				} else {
					g.Expect(outcome.ReasonOf(err, "")).NotTo(Equal(fleet.ReasonInvalidBundle), "does not stall: %v", err)
				}
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			b := bundles[0]
			prefix := ""
			if tt.chartDir != "" {
				prefix = tt.chartDir + "/"
			}
			var got []string
			for _, n := range resourceNames(b) {
				if rest, ok := strings.CutPrefix(n, prefix); ok {
					got = append(got, rest)
				}
			}
			g.Expect(got).To(Equal(tt.wantFiles))

			chartFiles := map[string][]byte{}
			for _, r := range b.Spec.Resources {
				if rest, ok := strings.CutPrefix(r.Name, prefix); ok {
					data, err := DecodeResource(r)
					g.Expect(err).NotTo(HaveOccurred())
					chartFiles[rest] = data
				}
			}
			ch, err := loadChartFiles(chartFiles)
			g.Expect(err).NotTo(HaveOccurred())
			subcharts := map[string]string{}
			for _, d := range ch.Dependencies() {
				subcharts[d.Name()] = d.Metadata.Version
			}
			g.Expect(subcharts).To(Equal(tt.wantDeps))
			if tt.wantLock != nil {
				lock := &chart.Lock{}
				g.Expect(yaml.Unmarshal([]byte(content(t, b, prefix+"Chart.lock")), lock)).To(Succeed())
				locked := map[string]string{}
				for _, d := range lock.Dependencies {
					locked[d.Name] = d.Version
				}
				g.Expect(locked).To(Equal(tt.wantLock))
				g.Expect(lock.Digest).To(HavePrefix("sha256:"))
			}
		})
	}
}

// The same commit gives the same bundle, and a Chart.lock that already
// matches is kept as it is.
func TestChartDependenciesAreStable(t *testing.T) {
	g := NewWithT(t)
	deps := newChartRepo(t, map[string][]string{"redis": {"1.0.0"}}, false)
	root := tree(t, map[string]string{"app/Chart.yaml": chartWithDeps(deps.URL, [3]string{"redis", "1.0.0", "REPO"})})
	first, err := Read(context.Background(), root, []string{"app"}, Options{Name: "s"})
	g.Expect(err).NotTo(HaveOccurred())
	second, err := Read(context.Background(), root, []string{"app"}, Options{Name: "s"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(second[0].Spec.Resources).To(Equal(first[0].Spec.Resources))

	lock := content(t, first[0], "Chart.lock") + "# committed\n"
	write(t, root, map[string]string{"app/Chart.lock": lock})
	third, err := Read(context.Background(), root, []string{"app"}, Options{Name: "s"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(content(t, third[0], "Chart.lock")).To(Equal(lock))
}

// Helm credentials go to a dependency's repository only where HelmAuth's
// URL pattern allows, as for the bundle's own chart.
func TestChartDependencyCredentials(t *testing.T) {
	secure := newChartRepo(t, map[string][]string{"redis": {"1.0.0"}}, true)
	for _, allowed := range []bool{true, false} {
		g := NewWithT(t)
		root := tree(t, map[string]string{"app/Chart.yaml": chartWithDeps(secure.URL, [3]string{"redis", "1.0.0", "REPO"})})
		auth := *secure.auth
		if !allowed {
			auth.URLRegex = nil
		}
		before, _ := secure.Requests()
		_, beforeAuth := secure.Requests()
		bundles, err := Read(context.Background(), root, []string{"app"}, Options{Name: "c", HelmAuth: &auth})
		n, auths := secure.Requests()
		g.Expect(n).To(BeNumerically(">", before))
		if allowed {
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(resourceNames(bundles[0])).To(ContainElement("charts/redis-1.0.0.tgz"))
			g.Expect(len(auths)).To(BeNumerically(">", len(beforeAuth)))
			continue
		}
		g.Expect(err).To(MatchError(ContainSubstring("fetching dependency redis 1.0.0 from " + secure.URL)))
		g.Expect(err.Error()).To(ContainSubstring("401"))
		g.Expect(auths).To(HaveLen(len(beforeAuth)), "no credentials sent")
	}
}

// A file:// dependency is packaged as helm dependency update packages it,
// from its directory, so its .helmignore leaves files out of the archive,
// whether the dependency lies in the bundle or elsewhere in the repository;
// the bundle's own files keep them, as Fleet ships them.
func TestFileDependencyHonoursItsHelmIgnore(t *testing.T) {
	lib := func(dir string) map[string]string {
		return map[string]string{
			dir + "/Chart.yaml":          "apiVersion: v2\nname: lib\nversion: 0.3.1\n",
			dir + "/.helmignore":         "secret.yaml\ntemplates/skip.yaml\n",
			dir + "/secret.yaml":         "left out\n",
			dir + "/templates/lib.yaml":  "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: lib}\n",
			dir + "/templates/skip.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: skip}\n",
		}
	}
	for name, tc := range map[string]struct {
		files     map[string]string
		wantFiles []string
	}{
		"elsewhere in the repository": {
			files:     merge(map[string]string{"app/Chart.yaml": chartWithDeps("", [3]string{"lib", "*", "file://../lib"})}, lib("lib")),
			wantFiles: []string{"Chart.lock", "Chart.yaml", "charts/lib-0.3.1.tgz"},
		},
		"in the bundle": {
			files: merge(map[string]string{"app/Chart.yaml": chartWithDeps("", [3]string{"lib", "*", "file://./lib"})}, lib("app/lib")),
			wantFiles: []string{"Chart.lock", "Chart.yaml", "charts/lib-0.3.1.tgz", "lib/Chart.yaml", "lib/secret.yaml",
				"lib/templates/lib.yaml", "lib/templates/skip.yaml"},
		},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			root := t.TempDir()
			write(t, root, tc.files)
			bundles, err := Read(context.Background(), root, []string{"app"}, Options{Name: "deps"})
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(resourceNames(bundles[0])).To(Equal(tc.wantFiles))
			dep, err := loader.LoadArchive(strings.NewReader(content(t, bundles[0], "charts/lib-0.3.1.tgz")))
			g.Expect(err).NotTo(HaveOccurred())
			templates, files := make([]string, 0, len(dep.Templates)), make([]string, 0, len(dep.Files))
			for _, f := range dep.Templates {
				templates = append(templates, f.Name)
			}
			for _, f := range dep.Files {
				files = append(files, f.Name)
			}
			g.Expect(templates).To(Equal([]string{"templates/lib.yaml"}))
			g.Expect(files).NotTo(ContainElement("secret.yaml"))
		})
	}
}

func merge(a, b map[string]string) map[string]string {
	for k, v := range b {
		a[k] = v
	}
	return a
}
