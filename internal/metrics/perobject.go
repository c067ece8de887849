package metrics

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/summary"
)

// DefaultPerObjectMaxSeries is the default cap on the series the per-object
// metrics serve.
const DefaultPerObjectMaxSeries = 10000

// Rancher's labels on a Cluster that Fleet's cluster metrics carry.
const (
	rancherClusterNameLabel        = "management.cattle.io/cluster-name"
	rancherClusterDisplayNameLabel = "management.cattle.io/cluster-display-name"
)

// The per-object metrics: Fleet's names and labels (its internal/metrics),
// one series per object (and per state for the *_state gauges), so that
// Fleet's Grafana dashboards work unchanged. They are computed at scrape
// time from the manager's cache, and off unless SetupPerObject turns them
// on: their series grow with the objects, where the state gauges of this
// package grow with namespaces only.
var (
	bundleLabels = []string{"name", "namespace", "commit", "repo", "generation", "state"}
	bdLabels     = []string{"name", "namespace", "cluster_name", "cluster_namespace", "repo", "commit", "bundle",
		"bundle_namespace", "generation", "state"}
	clusterLabels = []string{"name", "namespace", "cluster_name", "cluster_display_name", "generation", "state"}
	gitRepoLabels = []string{"name", "namespace", "repo", "branch", "paths", "commit"}
	helmOpLabels  = []string{"name", "namespace", "repo", "chart", "version"}

	// clusterStates are the states fleet_cluster_state has a series for.
	clusterStates = []string{string(fleet.NotReady), string(fleet.Ready), fleet.ClusterStateWaitCheckIn}

	bundleCounts = []struct {
		name string
		get  func(*fleet.BundleSummary) int
	}{
		{"not_ready", func(s *fleet.BundleSummary) int { return s.NotReady }},
		{"wait_applied", func(s *fleet.BundleSummary) int { return s.WaitApplied }},
		{"err_applied", func(s *fleet.BundleSummary) int { return s.ErrApplied }},
		{"out_of_sync", func(s *fleet.BundleSummary) int { return s.OutOfSync }},
		{"modified", func(s *fleet.BundleSummary) int { return s.Modified }},
		{"ready", func(s *fleet.BundleSummary) int { return s.Ready }},
		{"pending", func(s *fleet.BundleSummary) int { return s.Pending }},
		{"desired_ready", func(s *fleet.BundleSummary) int { return s.DesiredReady }},
	}
	// resourceCounts are the resource counts of GitRepos and HelmOps
	// (resources_<name>) and of Clusters (resources_count_<name without
	// underscores>).
	resourceCounts = []struct {
		name string
		get  func(*fleet.ResourceCounts) int
	}{
		{"desired_ready", func(c *fleet.ResourceCounts) int { return c.DesiredReady }},
		{"missing", func(c *fleet.ResourceCounts) int { return c.Missing }},
		{"modified", func(c *fleet.ResourceCounts) int { return c.Modified }},
		{"not_ready", func(c *fleet.ResourceCounts) int { return c.NotReady }},
		{"orphaned", func(c *fleet.ResourceCounts) int { return c.Orphaned }},
		{"ready", func(c *fleet.ResourceCounts) int { return c.Ready }},
		{"unknown", func(c *fleet.ResourceCounts) int { return c.Unknown }},
		{"wait_applied", func(c *fleet.ResourceCounts) int { return c.WaitApplied }},
	}
)

// perObjectDescs holds every metric's description, by name.
var perObjectDescs = func() map[string]*prometheus.Desc {
	d := map[string]*prometheus.Desc{}
	add := func(name, help string, labels []string) { d[name] = prometheus.NewDesc(name, help, labels, nil) }
	for _, c := range bundleCounts {
		add("fleet_bundle_"+c.name, "Number of deployments of a bundle in the "+c.name+" count of its summary.", bundleLabels)
	}
	add("fleet_bundle_state", "Shows the state of this bundle based on the state label. A value of 1 is true 0 is false.", bundleLabels)
	add("fleet_bundledeployment_state", "Shows the state of this bundle deployment based on the state label. A value of 1 is true 0 is false.", bdLabels)
	add("fleet_cluster_desired_ready_git_repos", "The desired number of GitRepos to be in a ready state.", clusterLabels)
	add("fleet_cluster_ready_git_repos", "The number of GitRepos in a ready state.", clusterLabels)
	for _, c := range resourceCounts {
		add("fleet_cluster_resources_count_"+strings.ReplaceAll(c.name, "_", ""), "The number of the cluster's resources in this count.", clusterLabels)
		add("fleet_gitrepo_resources_"+c.name, "The count of the GitRepo's resources in this count.", gitRepoLabels)
		add("fleet_helmop_resources_"+c.name, "The count of the HelmOp's resources in this count.", helmOpLabels)
	}
	add("fleet_cluster_state", "The current state of a given cluster", clusterLabels)
	for _, k := range []struct{ kind string }{{"gitrepo"}, {"helmop"}} {
		labels := gitRepoLabels
		if k.kind == "helmop" {
			labels = helmOpLabels
		}
		add("fleet_"+k.kind+"_desired_ready_clusters", "The amount of clusters desired to be in a ready state.", labels)
		add("fleet_"+k.kind+"_ready_clusters", "The count of clusters in a Ready state.", labels)
	}
	add("fleet_per_object_metrics_dropped_objects", "Objects left out of the per-object metrics by --per-object-metrics-max-series at the last scrape.", nil)
	return d
}()

// perObject is the collector of the per-object metrics; it serves nothing
// until SetupPerObject gives it a reader.
type perObject struct {
	mu        sync.Mutex
	reader    client.Reader
	maxSeries int
}

var perObjectCollector = &perObject{}

// SetupPerObject turns the per-object metrics on for as long as mgr runs,
// read from its cache, at most maxSeries series per scrape (0: the
// default).
func SetupPerObject(mgr ctrl.Manager, maxSeries int) error {
	if maxSeries <= 0 {
		maxSeries = DefaultPerObjectMaxSeries
	}
	return mgr.Add(perObjectRunner{reader: mgr.GetCache(), maxSeries: maxSeries})
}

type perObjectRunner struct {
	reader    client.Reader
	maxSeries int
}

// NeedLeaderElection: every replica serves them, from its own cache.
func (perObjectRunner) NeedLeaderElection() bool { return false }

func (r perObjectRunner) Start(ctx context.Context) error {
	perObjectCollector.set(r.reader, r.maxSeries)
	<-ctx.Done()
	perObjectCollector.set(nil, 0)
	return nil
}

func (p *perObject) set(r client.Reader, maxSeries int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.reader, p.maxSeries = r, maxSeries
}

// Describe sends every per-object metric's description.
func (p *perObject) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range perObjectDescs {
		ch <- d
	}
}

// Collect lists the objects from the cache (no copies: they are only read)
// and sends their series, object by object, until the next object would
// pass maxSeries: Clusters, GitRepos and HelmOps first, then Bundles, then
// BundleDeployments, the most numerous.
func (p *perObject) Collect(ch chan<- prometheus.Metric) {
	p.mu.Lock()
	r, maxSeries := p.reader, p.maxSeries
	p.mu.Unlock()
	if r == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	e := &emitter{ch: ch, left: maxSeries}
	noCopy := client.UnsafeDisableDeepCopy
	clusters := &fleet.ClusterList{}
	if r.List(ctx, clusters, noCopy) == nil {
		for i := range clusters.Items {
			e.object(clusterSeries(&clusters.Items[i]))
		}
	}
	repos := &fleet.GitRepoList{}
	if r.List(ctx, repos, noCopy) == nil {
		for i := range repos.Items {
			e.object(gitRepoSeries(&repos.Items[i]))
		}
	}
	helmOps := &fleet.HelmOpList{}
	if r.List(ctx, helmOps, noCopy) == nil {
		for i := range helmOps.Items {
			e.object(helmOpSeries(&helmOps.Items[i]))
		}
	}
	bundles := &fleet.BundleList{}
	if r.List(ctx, bundles, noCopy) == nil {
		for i := range bundles.Items {
			e.object(bundleSeries(&bundles.Items[i]))
		}
	}
	bds := &fleet.BundleDeploymentList{}
	if r.List(ctx, bds, noCopy) == nil {
		for i := range bds.Items {
			e.object(bundleDeploymentSeries(&bds.Items[i]))
		}
	}
	ch <- prometheus.MustNewConstMetric(perObjectDescs["fleet_per_object_metrics_dropped_objects"], prometheus.GaugeValue, float64(e.dropped))
}

// series is one sample of a per-object metric.
type series struct {
	name   string
	value  float64
	labels []string
}

// emitter sends objects' series while the budget lasts.
type emitter struct {
	ch      chan<- prometheus.Metric
	left    int
	dropped int
}

func (e *emitter) object(s []series) {
	if len(s) > e.left {
		e.dropped++
		return
	}
	e.left -= len(s)
	for _, x := range s {
		e.ch <- prometheus.MustNewConstMetric(perObjectDescs[x.name], prometheus.GaugeValue, x.value, x.labels...)
	}
}

// stateSeries is a 1 for the state among states, 0 for the others, with
// the state as the last label.
func stateSeries(name string, labels []string, states []string, current string) []series {
	out := make([]series, 0, len(states))
	for _, st := range states {
		v := 0.0
		if st == current {
			v = 1
		}
		out = append(out, series{name: name, value: v, labels: append(labels[:len(labels):len(labels)], st)})
	}
	return out
}

func generation(g int64) string { return strconv.FormatInt(g, 10) }

func bundleSeries(b *fleet.Bundle) []series {
	state := string(summary.WorstState(b.Status.Summary))
	labels := []string{b.Name, b.Namespace, b.Labels[fleet.CommitLabel], b.Labels[fleet.RepoLabel], generation(b.Generation)}
	out := make([]series, 0, len(bundleCounts)+len(bundleStates))
	for _, c := range bundleCounts {
		out = append(out, series{name: "fleet_bundle_" + c.name, value: float64(c.get(&b.Status.Summary)), labels: append(labels[:5:5], state)})
	}
	return append(out, stateSeries("fleet_bundle_state", labels, bundleStates, state)...)
}

func bundleDeploymentSeries(bd *fleet.BundleDeployment) []series {
	l := bd.Labels
	labels := []string{bd.Name, bd.Namespace, l[fleet.ClusterLabel], l[fleet.ClusterNamespaceLabel], l[fleet.RepoLabel], l[fleet.CommitLabel],
		l[fleet.BundleNameLabel], l[fleet.BundleNamespaceLabel], generation(bd.Generation)}
	return stateSeries("fleet_bundledeployment_state", labels, bundleStates, string(summary.State(bd)))
}

func clusterSeries(c *fleet.Cluster) []series {
	st := &c.Status
	labels := []string{c.Name, c.Namespace, c.Labels[rancherClusterNameLabel], c.Labels[rancherClusterDisplayNameLabel], generation(c.Generation)}
	withState := append(labels[:5:5], st.Display.State)
	out := []series{
		{name: "fleet_cluster_desired_ready_git_repos", value: float64(st.DesiredReadyGitRepos), labels: withState},
		{name: "fleet_cluster_ready_git_repos", value: float64(st.ReadyGitRepos), labels: withState},
	}
	for _, rc := range resourceCounts {
		out = append(out, series{name: "fleet_cluster_resources_count_" + strings.ReplaceAll(rc.name, "_", ""),
			value: float64(rc.get(&st.ResourceCounts)), labels: withState})
	}
	return append(out, stateSeries("fleet_cluster_state", labels, clusterStates, st.Display.State)...)
}

// sourceSeries are the series of a GitRepo or HelmOp (kind "gitrepo" or
// "helmop").
func sourceSeries(kind string, labels []string, ready, desired int, counts *fleet.ResourceCounts) []series {
	out := make([]series, 0, 2+len(resourceCounts))
	out = append(out,
		series{name: "fleet_" + kind + "_desired_ready_clusters", value: float64(desired), labels: labels},
		series{name: "fleet_" + kind + "_ready_clusters", value: float64(ready), labels: labels},
	)
	for _, rc := range resourceCounts {
		out = append(out, series{name: "fleet_" + kind + "_resources_" + rc.name, value: float64(rc.get(counts)), labels: labels})
	}
	return out
}

func gitRepoSeries(r *fleet.GitRepo) []series {
	labels := []string{r.Name, r.Namespace, r.Spec.Repo, r.Spec.Branch, strings.Join(r.Spec.Paths, ";"), r.Status.Commit}
	return sourceSeries("gitrepo", labels, r.Status.ReadyClusters, r.Status.DesiredReadyClusters, &r.Status.ResourceCounts)
}

func helmOpSeries(h *fleet.HelmOp) []series {
	var repo, chart string
	if h.Spec.Helm != nil {
		repo, chart = h.Spec.Helm.Repo, h.Spec.Helm.Chart
	}
	labels := []string{h.Name, h.Namespace, repo, chart, h.Status.Version}
	return sourceSeries("helmop", labels, h.Status.ReadyClusters, h.Status.DesiredReadyClusters, &h.Status.ResourceCounts)
}
