package metrics

import (
	"context"
	"fmt"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// The per-object metrics serve Fleet's series for each object once turned
// on, nothing before, and no more than their cap.
func TestPerObjectMetrics(t *testing.T) {
	g := NewWithT(t)
	bundle := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ws", Generation: 3,
		Labels: map[string]string{fleet.RepoLabel: "repo", fleet.CommitLabel: "abc"}},
		Status: fleet.BundleStatus{Summary: fleet.BundleSummary{DesiredReady: 2, Ready: 1, NotReady: 1}}}
	cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: "ws"},
		Status: fleet.ClusterStatus{ReadyGitRepos: 1, DesiredReadyGitRepos: 2, Display: fleet.ClusterDisplay{State: "Ready"},
			ResourceCounts: fleet.ResourceCounts{DesiredReady: 4, Ready: 3, Missing: 1}}}
	repo := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "repo", Namespace: "ws"},
		Spec:   fleet.GitRepoSpec{Repo: "https://git.example.com/r", Branch: "main", Paths: []string{"a", "b"}},
		Status: fleet.GitRepoStatus{Commit: "abc", ReadyClusters: 1, DesiredReadyClusters: 1}}
	c := &listReader{bundles: []fleet.Bundle{*bundle}, clusters: []fleet.Cluster{*cluster}, repos: []fleet.GitRepo{*repo}}

	reg := prometheus.NewPedanticRegistry()
	p := &perObject{}
	g.Expect(reg.Register(p)).To(Succeed())
	g.Expect(gather(g, reg)).To(BeEmpty(), "nothing before it is turned on")

	p.set(c, 1000)
	got := gather(g, reg)
	bundleLabels := `commit="abc",generation="3",name="app",namespace="ws",repo="repo"`
	for _, st := range bundleStates {
		v := 0.0
		if st == "NotReady" {
			v = 1
		}
		g.Expect(got).To(HaveKeyWithValue(`fleet_bundle_state{`+bundleLabels+`,state="`+st+`"}`, v))
	}
	g.Expect(got).To(HaveKeyWithValue(`fleet_bundle_not_ready{`+bundleLabels+`,state="NotReady"}`, 1.0))
	g.Expect(got).To(HaveKeyWithValue(`fleet_bundle_desired_ready{`+bundleLabels+`,state="NotReady"}`, 2.0))
	clusterLabels := `cluster_display_name="",cluster_name="",generation="0",name="edge",namespace="ws"`
	g.Expect(got).To(HaveKeyWithValue(`fleet_cluster_state{`+clusterLabels+`,state="Ready"}`, 1.0))
	g.Expect(got).To(HaveKeyWithValue(`fleet_cluster_state{`+clusterLabels+`,state="WaitCheckIn"}`, 0.0))
	g.Expect(got).To(HaveKeyWithValue(`fleet_cluster_resources_count_missing{`+clusterLabels+`,state="Ready"}`, 1.0))
	g.Expect(got).To(HaveKeyWithValue(`fleet_cluster_desired_ready_git_repos{`+clusterLabels+`,state="Ready"}`, 2.0))
	g.Expect(got).To(HaveKeyWithValue(`fleet_gitrepo_desired_ready_clusters{branch="main",commit="abc",name="repo",namespace="ws",paths="a;b",repo="https://git.example.com/r"}`, 1.0))
	g.Expect(got).To(HaveKeyWithValue(`fleet_per_object_metrics_dropped_objects`, 0.0))

	// A cap below an object's series leaves it out whole, counted.
	clusterSeriesN := len(clusterSeries(cluster))
	p.set(c, clusterSeriesN)
	got = gather(g, reg)
	g.Expect(got).To(HaveLen(clusterSeriesN+1), "the Cluster's series and the dropped count: %v", got)
	g.Expect(got).To(HaveKeyWithValue(`fleet_per_object_metrics_dropped_objects`, 2.0), "the GitRepo and the Bundle")

	p.set(nil, 0)
	g.Expect(gather(g, reg)).To(BeEmpty(), "nothing once turned off")
}

// gather reads reg as "name{labels}" -> value, labels sorted by name as
// Prometheus sorts them.
func gather(g *WithT, reg *prometheus.Registry) map[string]float64 {
	families, err := reg.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			key := f.GetName()
			if len(labels) > 0 {
				key += "{" + strings.Join(labels, ",") + "}"
			}
			out[key] = m.GetGauge().GetValue()
		}
	}
	return out
}

// listReader serves fixed lists, as the manager's cache would.
type listReader struct {
	client.Reader
	bundles  []fleet.Bundle
	clusters []fleet.Cluster
	repos    []fleet.GitRepo
}

func (r *listReader) List(_ context.Context, list client.ObjectList, _ ...client.ListOption) error {
	switch l := list.(type) {
	case *fleet.BundleList:
		l.Items = r.bundles
	case *fleet.ClusterList:
		l.Items = r.clusters
	case *fleet.GitRepoList:
		l.Items = r.repos
	}
	return nil
}
