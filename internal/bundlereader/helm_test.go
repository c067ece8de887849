package bundlereader

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chart/loader"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/test/chartrepo"
)

var logo = []byte{0x89, 'P', 'N', 'G', 0x00, 0xff, 0xfe}

// chartRepo is a real Helm chart repository on loopback (test/chartrepo)
// and what clients need to use it.
type chartRepo struct {
	*chartrepo.Repo
	auth *HelmAuth // credentials and the server's CA
}

// newChartRepo serves charts (name -> versions). With tls it serves HTTPS
// and requires basic auth.
func newChartRepo(t *testing.T, charts map[string][]string, tls bool) *chartRepo {
	t.Helper()
	var list []chartrepo.Chart
	for name, versions := range charts {
		for _, v := range versions {
			list = append(list, chartrepo.Chart{
				Name: name, Version: v, Values: "greeting: hello\n",
				Templates: map[string]string{"configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\ndata:\n  version: " + v + "\n"},
				Files:     map[string][]byte{"files/logo.png": logo},
			})
		}
	}
	o := chartrepo.Options{}
	if tls {
		o = chartrepo.Options{TLS: true, Username: "user", Password: "s3cret"}
	}
	repo, err := chartrepo.New(list, o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(repo.Close)
	r := &chartRepo{Repo: repo}
	if tls {
		r.auth = &HelmAuth{Username: "user", Password: "s3cret", CABundle: repo.CA, URLRegex: anyURL}
	}
	return r
}

// loadChart loads the chart a bundle carries under dir, as the agent would.
func loadChart(t *testing.T, b *fleet.Bundle, dir string) *chart.Chart {
	t.Helper()
	var files []*loader.BufferedFile
	for _, r := range b.Spec.Resources {
		if name, ok := strings.CutPrefix(r.Name, dir+"/"); ok {
			data, err := DecodeResource(r)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, &loader.BufferedFile{Name: name, Data: data})
		}
	}
	ch, err := loader.LoadFiles(files)
	if err != nil {
		t.Fatalf("loading chart %s from bundle %s: %v", dir, b.Name, err)
	}
	return ch
}

func TestRemoteChart(t *testing.T) {
	plain := newChartRepo(t, map[string][]string{
		"mychart": {"1.0.0", "1.0.1", "1.2.0", "1.3.0", "2.0.0", "3.0.0-rc.1"},
		"other":   {"0.1.0"},
	}, false)

	tests := []struct {
		name        string
		helm        string // body of helm: in fleet.yaml; REPO stands for the repository URL
		extra       string // more of fleet.yaml
		files       map[string]string
		wantVersion string // of the chart the bundle carries
		wantDir     string
		wantErr     []string
	}{
		{name: "exact version", helm: "repo: REPO\nchart: mychart\nversion: 1.2.0", wantVersion: "1.2.0", wantDir: "mychart"},
		{name: "caret range picks the newest match", helm: "repo: REPO\nchart: mychart\nversion: ^1.2.0", wantVersion: "1.3.0", wantDir: "mychart"},
		{name: "tilde range", helm: "repo: REPO/\nchart: mychart\nversion: ~1.0", wantVersion: "1.0.1", wantDir: "mychart"},
		{name: "no version: newest stable", helm: "repo: REPO\nchart: mychart", wantVersion: "2.0.0", wantDir: "mychart"},
		{name: "URL to a packaged chart", helm: "chart: REPO/mychart-1.0.0.tgz", wantVersion: "1.0.0", wantDir: "mychart"},
		{
			name:        "a local directory of the same name moves the chart aside",
			helm:        "repo: REPO\nchart: mychart\nversion: 1.2.0",
			files:       map[string]string{"mychart/notes.txt": "mine"},
			wantVersion: "1.2.0",
			wantDir:     "mychart-1.2.0",
		},
		{
			name:    "missing version",
			helm:    "repo: REPO\nchart: mychart\nversion: 9.9.9",
			wantErr: []string{"chart mychart version 9.9.9 not found in REPO (available: 3.0.0-rc.1, 2.0.0, 1.3.0, 1.2.0, 1.0.1, 1.0.0)"},
		},
		{
			name:    "no version in range",
			helm:    "repo: REPO\nchart: mychart\nversion: '>=4.0.0'",
			wantErr: []string{"chart mychart version >=4.0.0 not found in REPO"},
		},
		{
			name:    "invalid range",
			helm:    "repo: REPO\nchart: mychart\nversion: not-a-version",
			wantErr: []string{`version "not-a-version" is neither a version nor a semver range`},
		},
		{
			name:    "missing chart",
			helm:    "repo: REPO\nchart: nochart",
			wantErr: []string{`chart "nochart" not found in REPO (charts: mychart, other)`},
		},
		{
			name:    "repo without chart",
			helm:    "repo: REPO",
			wantErr: []string{"helm.chart is empty"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			files := map[string]string{"app/fleet.yaml": indent("helm:\n", tt.helm, plain.URL) + tt.extra}
			for k, v := range tt.files {
				files["app/"+k] = v
			}
			root := tree(t, files)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			bundles, err := Read(ctx, root, nil, Options{Name: "remote"})
			if tt.wantErr != nil {
				g.Expect(err).To(HaveOccurred())
				for _, w := range tt.wantErr {
					g.Expect(err.Error()).To(ContainSubstring(strings.ReplaceAll(w, "REPO", plain.URL)))
				}
				g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonInvalidBundle), "the user must fix it: %v", err)
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			b := bundles[0]
			g.Expect(b.Spec.Helm.Chart).To(Equal(tt.wantDir))
			g.Expect(b.Spec.Helm.Repo).To(BeEmpty())
			g.Expect(b.Spec.Helm.Version).To(BeEmpty())
			ch := loadChart(t, b, tt.wantDir)
			g.Expect(ch.Metadata.Version).To(Equal(tt.wantVersion))
			g.Expect(content(t, b, tt.wantDir+"/templates/configmap.yaml")).To(ContainSubstring("version: " + tt.wantVersion))
			g.Expect([]byte(content(t, b, tt.wantDir+"/files/logo.png"))).To(Equal(logo))
		})
	}
}

func TestRemoteChartPerTarget(t *testing.T) {
	g := NewWithT(t)
	r := newChartRepo(t, map[string][]string{"mychart": {"1.0.0", "2.0.0"}}, false)
	root := tree(t, map[string]string{"app/fleet.yaml": strings.ReplaceAll(`
helm:
  repo: REPO
  chart: mychart
  version: 1.0.0
targetCustomizations:
- name: next
  clusterGroup: canary
  helm:
    version: 2.0.0
- name: same
  clusterGroup: rest
  helm:
    version: "1.0.0"
    values: {x: 1}
`, "REPO", r.URL)})
	bundles, err := Read(context.Background(), root, nil, Options{Name: "pt"})
	g.Expect(err).NotTo(HaveOccurred())
	b := bundles[0]
	g.Expect(b.Spec.Helm.Chart).To(Equal("mychart"))
	g.Expect(b.Spec.Targets[0].Helm.Chart).To(Equal("mychart-2.0.0"))
	g.Expect(b.Spec.Targets[0].Helm.Version).To(BeEmpty())
	g.Expect(b.Spec.Targets[1].Helm.Chart).To(Equal("mychart"), "the same chart is carried once")
	g.Expect(loadChart(t, b, "mychart").Metadata.Version).To(Equal("1.0.0"))
	g.Expect(loadChart(t, b, "mychart-2.0.0").Metadata.Version).To(Equal("2.0.0"))
}

func TestRemoteChartAuthAndTLS(t *testing.T) {
	r := newChartRepo(t, map[string][]string{"secure": {"0.1.0"}}, true)
	tests := []struct {
		name    string
		auth    *HelmAuth
		wantErr string
	}{
		{name: "credentials and CA", auth: r.auth},
		{name: "no CA", auth: &HelmAuth{Username: "user", Password: "s3cret"}, wantErr: "certificate"},
		{name: "insecure", auth: &HelmAuth{Username: "user", Password: "s3cret", InsecureSkipVerify: true, URLRegex: anyURL}},
		{name: "wrong password", auth: &HelmAuth{Username: "user", Password: "nope", CABundle: r.auth.CABundle, URLRegex: anyURL}, wantErr: "401"},
		{name: "no URL regex: no credentials", auth: &HelmAuth{Username: "user", Password: "s3cret", CABundle: r.auth.CABundle}, wantErr: "401"},
		{name: "bad CA bundle", auth: &HelmAuth{CABundle: []byte("not PEM")}, wantErr: "holds no PEM certificate"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			root := tree(t, map[string]string{"fleet.yaml": "helm:\n  repo: " + r.URL + "\n  chart: secure\n"})
			bundles, err := Read(context.Background(), root, nil, Options{Name: "auth", HelmAuth: tt.auth})
			if tt.wantErr != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tt.wantErr)))
				g.Expect(err.Error()).NotTo(ContainSubstring("s3cret"))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(loadChart(t, bundles[0], "secure").Metadata.Version).To(Equal("0.1.0"))
		})
	}
}

var anyURL = regexp.MustCompile(`.*`)

// The credentials go only to a repository whose whole URL the regex
// matches, never to another host a fleet.yaml names.
func TestRemoteChartCredentialsOnlyWhereAllowed(t *testing.T) {
	var got []string
	var mu sync.Mutex
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		mu.Lock()
		got = append(got, req.Header.Get("Authorization"))
		mu.Unlock()
		http.NotFound(w, req)
	}))
	defer srv.Close()
	trusted, err := CompileURLRegex(`https://charts\.example\.com/.*`)
	if err != nil {
		t.Fatal(err)
	}
	for _, re := range []*regexp.Regexp{nil, trusted, regexp.MustCompile("^$")} {
		g := NewWithT(t)
		root := tree(t, map[string]string{"fleet.yaml": "helm:\n  repo: " + srv.URL + "/charts.example.com/\n  chart: x\n"})
		_, err := Read(context.Background(), root, nil, Options{Name: "c", HelmAuth: &HelmAuth{Username: "user", Password: "s3cret", URLRegex: re}})
		g.Expect(err).To(HaveOccurred())
	}
	g := NewWithT(t)
	g.Expect(got).To(HaveLen(3))
	for _, h := range got {
		g.Expect(h).To(BeEmpty(), "credentials were sent to a host the regex does not allow")
	}
}

func TestRemoteChartDownloadIsCapped(t *testing.T) {
	g := NewWithT(t)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		buf := make([]byte, 64<<10)
		for range 1 << 14 { // 1 GiB, without Content-Length
			if _, err := w.Write(buf); err != nil {
				return
			}
		}
	}))
	defer srv.Close()
	root := tree(t, map[string]string{"fleet.yaml": "helm:\n  repo: " + srv.URL + "\n  chart: huge\n"})
	start := time.Now()
	_, err := Read(context.Background(), root, nil, Options{Name: "huge", MaxDownloadBytes: 1 << 20})
	g.Expect(err).To(MatchError(ContainSubstring("larger than 1.0 MiB")))
	g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonInvalidBundle))
	g.Expect(time.Since(start)).To(BeNumerically("<", 10*time.Second))
}

func TestRemoteChartTimeout(t *testing.T) {
	g := NewWithT(t)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		<-release // a repository that never finishes its answer
	}))
	defer srv.Close()
	defer close(release)
	root := tree(t, map[string]string{"fleet.yaml": "helm:\n  repo: " + srv.URL + "\n  chart: slow\n"})

	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := Read(ctx, root, nil, Options{Name: "slow"})
	g.Expect(err).To(HaveOccurred())
	g.Expect(outcome.ReasonOf(err, "")).NotTo(Equal(fleet.ReasonInvalidBundle), "a transient error")
	g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))

	// Cancelling, rather than a deadline, ends the download too.
	ctx, cancel = context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	start = time.Now()
	_, err = Read(ctx, root, nil, Options{Name: "slow"})
	g.Expect(err).To(MatchError(context.Canceled))
	g.Expect(time.Since(start)).To(BeNumerically("<", 5*time.Second))
}

// indent makes a YAML block of head followed by body indented by two
// spaces, with REPO replaced by url.
func indent(head, body, url string) string {
	var b strings.Builder
	b.WriteString(head)
	for _, l := range strings.Split(strings.ReplaceAll(body, "REPO", url), "\n") {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}
