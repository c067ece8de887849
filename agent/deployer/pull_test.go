package deployer

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/gitfleet/fleet/agent/deployrpc"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/test/chartrepo"
)

func pullChart(version string) chartrepo.Chart {
	return chartrepo.Chart{Name: "app", Version: version, Values: "x: 1\n",
		Templates: map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {v: \"" + version + "\"}\n"}}
}

// The chart of a HelmOp's BundleDeployment, downloaded from an HTTPS
// repository with basic auth and its CA: the files the deploy gets hold the
// chart at the version asked, and helm.chart points at it.
func TestPullChartFromAuthenticatedRepository(t *testing.T) {
	g := NewWithT(t)
	repo, err := chartrepo.New([]chartrepo.Chart{pullChart("1.0.0"), pullChart("1.1.0")}, chartrepo.Options{TLS: true, Username: "u", Password: "pw"})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(repo.Close)
	opts := fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Repo: repo.URL, Chart: "app", Version: "1.0.0", ReleaseName: "rel"}}
	src := deployrpc.ChartSource{Repo: repo.URL, Chart: "app", Version: "1.0.0", Username: "u", Password: "pw", CABundle: repo.CA}

	files, got, err := PullChart(context.Background(), src, opts, "")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.Helm.Chart).To(Equal(PulledChartFile))
	g.Expect(got.Helm.ReleaseName).To(Equal("rel"))
	g.Expect(opts.Helm.Chart).To(Equal("app"), "the options given are not changed")
	l, err := Detect(files, got)
	g.Expect(err).NotTo(HaveOccurred())
	ch, err := BuildChart(files, l, got, "rel")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ch.Metadata.Version).To(Equal("1.0.0"))

	for name, tc := range map[string]struct {
		src  deployrpc.ChartSource
		want string
	}{
		"wrong password": {deployrpc.ChartSource{Repo: repo.URL, Chart: "app", Version: "1.0.0", Username: "u", Password: "no", CABundle: repo.CA, SecretName: "cluster-ns/app"},
			"401 Unauthorized"},
		"no CA":         {deployrpc.ChartSource{Repo: repo.URL, Chart: "app", Version: "1.0.0", Username: "u", Password: "pw"}, "certificate"},
		"no such chart": {deployrpc.ChartSource{Repo: repo.URL, Chart: "app", Version: "9.9.9", Username: "u", Password: "pw", CABundle: repo.CA}, "no chart app version 9.9.9"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			_, _, err := PullChart(context.Background(), tc.src, opts, "")
			g.Expect(err).To(HaveOccurred())
			g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonChartDownloadFailed))
			g.Expect(outcome.IsWaiting(err)).To(BeTrue(), "tried again after a while")
			g.Expect(err.Error()).To(And(ContainSubstring(tc.want), ContainSubstring("from "+repo.URL), ContainSubstring("check that the repository is reachable")))
			if tc.src.SecretName != "" {
				g.Expect(err.Error()).To(ContainSubstring("Secret cluster-ns/app"))
			}
		})
	}
}

// A chart URL on another host than the credentials' gets none; an OCI
// registry is pulled by tag, with insecureSkipTLSVerify for its
// self-signed certificate.
func TestPullChartCredentialsAndOCI(t *testing.T) {
	g := NewWithT(t)
	open, err := chartrepo.New([]chartrepo.Chart{pullChart("1.0.0")}, chartrepo.Options{})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(open.Close)
	src := deployrpc.ChartSource{Repo: open.URL, Chart: "app", Version: "1.0.0", Username: "u", Password: "pw"}
	_, _, err = PullChart(context.Background(), src, fleet.BundleDeploymentOptions{}, "")
	g.Expect(err).NotTo(HaveOccurred())
	_, auths := open.Requests()
	g.Expect(auths).To(HaveLen(2), "index and chart, on the repository's host, with the credentials")

	g.Expect(sameHost("https://a.example:443/charts", "https://a.example:443/x.tgz")).To(BeTrue())
	g.Expect(sameHost("https://a.example/charts", "https://b.example/x.tgz")).To(BeFalse())

	reg := chartrepo.NewRegistry()
	t.Cleanup(reg.Close)
	g.Expect(reg.Push("charts/app", pullChart("1.3.0"))).To(Succeed())
	_, _, err = PullChart(context.Background(), deployrpc.ChartSource{Repo: reg.Ref("charts/app"), Version: "1.3.0"}, fleet.BundleDeploymentOptions{}, "")
	g.Expect(err).To(MatchError(ContainSubstring("certificate")), "refused without trust")
	files, got, err := PullChart(context.Background(), deployrpc.ChartSource{Repo: reg.Ref("charts/app"), Version: "1.3.0", InsecureSkipTLSVerify: true}, fleet.BundleDeploymentOptions{}, "")
	g.Expect(err).NotTo(HaveOccurred())
	l, err := Detect(files, got)
	g.Expect(err).NotTo(HaveOccurred())
	ch, err := BuildChart(files, l, got, "rel")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ch.Metadata.Version).To(Equal("1.3.0"))
}

// A chart downloaded once is deployed again from the agent's cache, without
// a request to its repository; other credentials download it themselves
// (and are refused when wrong), and a kept chart that no longer loads is
// downloaded again.
func TestPullChartKeepsTheChart(t *testing.T) {
	g := NewWithT(t)
	repo, err := chartrepo.New([]chartrepo.Chart{pullChart("1.0.0")}, chartrepo.Options{Username: "u", Password: "pw"})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(repo.Close)
	dir := filepath.Join(t.TempDir(), "charts")
	src := deployrpc.ChartSource{Repo: repo.URL, Chart: "app", Version: "1.0.0", Username: "u", Password: "pw"}
	pull := func(src deployrpc.ChartSource) (Files, error) {
		files, _, err := PullChart(context.Background(), src, fleet.BundleDeploymentOptions{}, dir)
		return files, err
	}

	first, err := pull(src)
	g.Expect(err).NotTo(HaveOccurred())
	downloads, _ := repo.Requests()
	g.Expect(downloads).To(BeNumerically(">", 0))
	again, err := pull(src)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(first))
	after, _ := repo.Requests()
	g.Expect(after).To(Equal(downloads), "the second deploy reads the kept chart")

	entries, err := os.ReadDir(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(1))
	info, err := os.Stat(dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(info.Mode().Perm()).To(Equal(os.FileMode(0o700)), "only the agent reads its charts")

	wrong := src
	wrong.Password = "guess"
	_, err = pull(wrong)
	g.Expect(err).To(MatchError(ContainSubstring("401")), "other credentials are never served the kept chart")
	none := src
	none.Username, none.Password = "", ""
	_, err = pull(none)
	g.Expect(err).To(MatchError(ContainSubstring("401")), "nor are no credentials")

	g.Expect(os.WriteFile(filepath.Join(dir, entries[0].Name()), []byte("truncated"), 0o600)).To(Succeed())
	before, _ := repo.Requests()
	again, err = pull(src)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(first))
	after, _ = repo.Requests()
	g.Expect(after).To(BeNumerically(">", before), "a kept chart that does not load is downloaded again")
}

// The cache keeps the most recently used charts within its bounds.
func TestChartCacheEvictsTheLeastRecentlyUsed(t *testing.T) {
	g := NewWithT(t)
	c := chartCache{dir: filepath.Join(t.TempDir(), "charts")}
	src := func(i int) deployrpc.ChartSource {
		return deployrpc.ChartSource{Repo: "https://charts.example.com", Chart: "app", Version: fmt.Sprintf("1.0.%d", i)}
	}
	for i := range chartCacheMaxFiles + 5 {
		c.put(src(i), []byte{byte(i)})
		// Use the first one each time: it stays.
		_, ok := c.get(src(0))
		g.Expect(ok).To(BeTrue())
		time.Sleep(2 * time.Millisecond)
	}
	entries, err := os.ReadDir(c.dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(chartCacheMaxFiles))
	_, ok := c.get(src(0))
	g.Expect(ok).To(BeTrue(), "the chart used most recently is kept")
	_, ok = c.get(src(1))
	g.Expect(ok).To(BeFalse(), "the least recently used is evicted")
	_, ok = c.get(src(chartCacheMaxFiles + 4))
	g.Expect(ok).To(BeTrue())
}

// A chart of no exact version is downloaded at each deploy, and a cache
// directory others may write is not used.
func TestChartCacheKeepsOnlyWhatItMay(t *testing.T) {
	g := NewWithT(t)
	c := chartCache{dir: filepath.Join(t.TempDir(), "charts")}
	latest := deployrpc.ChartSource{Chart: "https://charts.example.com/app-latest.tgz"}
	c.put(latest, []byte("chart"))
	_, ok := c.get(latest)
	g.Expect(ok).To(BeFalse(), "no version: not kept")

	exact := deployrpc.ChartSource{Repo: "https://charts.example.com", Chart: "app", Version: "1.0.0"}
	c.put(exact, []byte("chart"))
	_, ok = c.get(exact)
	g.Expect(ok).To(BeTrue())
	g.Expect(os.Chmod(c.dir, 0o777)).To(Succeed())
	_, ok = c.get(exact)
	g.Expect(ok).To(BeFalse(), "a directory others may write is not read")
	c.put(deployrpc.ChartSource{Repo: "https://charts.example.com", Chart: "app", Version: "2.0.0"}, []byte("chart"))
	entries, err := os.ReadDir(c.dir)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(entries).To(HaveLen(1), "nor written")
}
