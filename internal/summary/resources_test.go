package summary

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

var (
	webRes = fleet.BundleDeploymentResource{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "app", Name: "web"}
	cmRes  = fleet.BundleDeploymentResource{APIVersion: "v1", Kind: "ConfigMap", Namespace: "app", Name: "cm"}
	nsRes  = fleet.BundleDeploymentResource{APIVersion: "v1", Kind: "Namespace", Name: "app"}
)

// deployment is a ready, applied BundleDeployment of bundle on cluster
// ws/<cluster> deploying res, changed by mutate.
func deployment(cluster string, mutate func(*fleet.BundleDeployment), res ...fleet.BundleDeploymentResource) *fleet.BundleDeployment {
	bd := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "bundle", Namespace: "cluster-ws-" + cluster,
		Labels: map[string]string{fleet.ClusterNamespaceLabel: "ws", fleet.ClusterLabel: cluster, fleet.RepoLabel: "repo"}}}
	bd.Spec.DeploymentID, bd.Spec.StagedDeploymentID = "s-1:a", "s-1:a"
	bd.Status.AppliedDeploymentID, bd.Status.Ready, bd.Status.NonModified = "s-1:a", true, true
	bd.Status.Resources = res
	bd.Status.ResourceCounts = fleet.ResourceCounts{DesiredReady: len(res), Ready: len(res)}
	if mutate != nil {
		mutate(bd)
	}
	return bd
}

func TestResources(t *testing.T) {
	notReadyWeb := func(bd *fleet.BundleDeployment) {
		bd.Status.Ready = false
		bd.Status.NonReadyStatus = []fleet.NonReadyStatus{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "app", Name: "web",
			Summary: fleet.Summary{State: "updating", Transitioning: true, Message: []string{"0/1 available"}}}}
		bd.Status.ResourceCounts = fleet.ResourceCounts{DesiredReady: 2, Ready: 1, NotReady: 1}
	}
	cases := []struct {
		name       string
		bds        []*fleet.BundleDeployment
		want       []fleet.GitRepoResource
		wantCounts fleet.ResourceCounts
	}{
		{name: "none", want: nil},
		{
			name: "ready on one cluster, not ready and modified on another",
			bds: []*fleet.BundleDeployment{
				deployment("b", func(bd *fleet.BundleDeployment) {
					notReadyWeb(bd)
					bd.Status.NonModified = false
					bd.Status.ModifiedStatus = []fleet.ModifiedStatus{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "app", Name: "cm", Patch: `{"data":null}`}}
					bd.Status.ResourceCounts = fleet.ResourceCounts{DesiredReady: 2, Modified: 1, NotReady: 1}
				}, webRes, cmRes),
				deployment("a", nil, webRes, cmRes),
			},
			want: []fleet.GitRepoResource{
				{APIVersion: "apps/v1", Kind: "Deployment", Type: "apps.deployment", ID: "app/web", Namespace: "app", Name: "web",
					State: "updating", Transitioning: true, Message: "0/1 available",
					PerClusterState: fleet.PerClusterState{Ready: []string{"ws/a"}, NotReady: []string{"ws/b"}}},
				{APIVersion: "v1", Kind: "ConfigMap", Type: "configmap", ID: "app/cm", Namespace: "app", Name: "cm",
					State: "Modified", PerClusterState: fleet.PerClusterState{Ready: []string{"ws/a"}, Modified: []string{"ws/b"}}},
			},
			wantCounts: fleet.ResourceCounts{DesiredReady: 4, Ready: 2, Modified: 1, NotReady: 1},
		},
		{
			name: "missing, orphaned and cluster-scoped",
			bds: []*fleet.BundleDeployment{deployment("a", func(bd *fleet.BundleDeployment) {
				bd.Status.NonModified = false
				bd.Status.ModifiedStatus = []fleet.ModifiedStatus{
					{APIVersion: "v1", Kind: "ConfigMap", Namespace: "app", Name: "cm", Create: true},
					{APIVersion: "v1", Kind: "ConfigMap", Namespace: "app", Name: "old", Delete: true},
				}
			}, nsRes, cmRes)},
			want: []fleet.GitRepoResource{
				{APIVersion: "v1", Kind: "ConfigMap", Type: "configmap", ID: "app/cm", Namespace: "app", Name: "cm",
					State: "Missing", PerClusterState: fleet.PerClusterState{Missing: []string{"ws/a"}}},
				{APIVersion: "v1", Kind: "ConfigMap", Type: "configmap", ID: "app/old", Namespace: "app", Name: "old",
					State: "Orphaned", PerClusterState: fleet.PerClusterState{Orphaned: []string{"ws/a"}}},
				{APIVersion: "v1", Kind: "Namespace", Type: "namespace", ID: "app", Name: "app",
					State: "Ready", PerClusterState: fleet.PerClusterState{Ready: []string{"ws/a"}}},
			},
			wantCounts: fleet.ResourceCounts{DesiredReady: 2, Ready: 2},
		},
		{
			name: "not applied yet, failed to apply, staged",
			bds: []*fleet.BundleDeployment{
				deployment("a", func(bd *fleet.BundleDeployment) { bd.Spec.DeploymentID, bd.Spec.StagedDeploymentID = "s-2:a", "s-2:a" }, cmRes),
				deployment("b", func(bd *fleet.BundleDeployment) {
					bd.Spec.DeploymentID, bd.Spec.StagedDeploymentID = "s-2:a", "s-2:a"
					bd.Status.Conditions = []metav1.Condition{{Type: fleet.ConditionDeployed, Status: metav1.ConditionFalse, Reason: "InstallFailed"}}
				}, cmRes),
				deployment("c", func(bd *fleet.BundleDeployment) { bd.Spec.StagedDeploymentID = "s-2:a" }, cmRes),
			},
			want: []fleet.GitRepoResource{
				{APIVersion: "v1", Kind: "ConfigMap", Type: "configmap", ID: "app/cm", Namespace: "app", Name: "cm",
					State: "WaitApplied", PerClusterState: fleet.PerClusterState{WaitApplied: []string{"ws/a", "ws/b"}, Pending: []string{"ws/c"}}},
			},
			wantCounts: fleet.ResourceCounts{DesiredReady: 3, Ready: 3},
		},
		{
			name: "an agent that cut its lists leaves the others unknown",
			bds: []*fleet.BundleDeployment{deployment("a", func(bd *fleet.BundleDeployment) {
				notReadyWeb(bd)
				bd.Status.IncompleteState = true
			}, webRes, cmRes)},
			want: []fleet.GitRepoResource{
				{APIVersion: "apps/v1", Kind: "Deployment", Type: "apps.deployment", ID: "app/web", Namespace: "app", Name: "web",
					State: "updating", Transitioning: true, Message: "0/1 available", IncompleteState: true,
					PerClusterState: fleet.PerClusterState{NotReady: []string{"ws/a"}}},
				{APIVersion: "v1", Kind: "ConfigMap", Type: "configmap", ID: "app/cm", Namespace: "app", Name: "cm",
					State: "Unknown", IncompleteState: true, PerClusterState: fleet.PerClusterState{Unknown: []string{"ws/a"}}},
			},
			wantCounts: fleet.ResourceCounts{DesiredReady: 2, Ready: 1, NotReady: 1},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			var before []*fleet.BundleDeployment
			for _, bd := range tc.bds {
				before = append(before, bd.DeepCopy())
			}
			got, counts := Resources(tc.bds)
			g.Expect(got).To(Equal(tc.want))
			g.Expect(counts).To(Equal(tc.wantCounts))
			g.Expect(tc.bds).To(Equal(before), "the deployments are the cache's: left as they were")
		})
	}
}

// TestResourcesBounds: at most maxResources resources and
// maxClustersPerState clusters per state are listed, the cut ones marked
// incomplete, while the counts stay exact.
func TestResourcesBounds(t *testing.T) {
	g := NewWithT(t)
	many := make([]fleet.BundleDeploymentResource, 0, maxResources+200)
	for i := range maxResources + 200 {
		many = append(many, fleet.BundleDeploymentResource{APIVersion: "v1", Kind: "ConfigMap", Namespace: "app", Name: fmt.Sprintf("cm%05d", i)})
	}
	bds := make([]*fleet.BundleDeployment, 0, maxClustersPerState+5)
	for i := range maxClustersPerState + 5 {
		bds = append(bds, deployment(fmt.Sprintf("c%02d", i), nil, many...))
	}
	got, counts := Resources(bds)
	g.Expect(got).To(HaveLen(maxResources))
	g.Expect(got[0].Name).To(Equal("cm00000"), "sorted by type and id")
	g.Expect(got[0].PerClusterState.Ready).To(HaveLen(maxClustersPerState))
	g.Expect(got[0].PerClusterState.Ready[0]).To(Equal("ws/c00"))
	g.Expect(got[0].IncompleteState).To(BeTrue(), "clusters were left out")
	g.Expect(got[0].State).To(Equal("Ready"))
	g.Expect(counts.DesiredReady).To(Equal((maxResources + 200) * (maxClustersPerState + 5)))
	g.Expect(counts.Ready).To(Equal(counts.DesiredReady))
}

// BenchmarkResources is a GitRepo's status over 1000 clusters of 10
// bundles, each deploying one ConfigMap: what the GitRepo controller
// computes at every reconcile during a rollout.
func BenchmarkResources(b *testing.B) {
	bds := make([]*fleet.BundleDeployment, 0, 10000)
	for c := range 1000 {
		for i := range 10 {
			bd := deployment(fmt.Sprintf("c%04d", (c*7919)%1000), nil,
				fleet.BundleDeploymentResource{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: fmt.Sprintf("b-%d", i)})
			bd.Name = fmt.Sprintf("b-%d", i)
			bds = append(bds, bd)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		Resources(bds)
	}
}
