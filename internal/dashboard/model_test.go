package dashboard

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/summary"
)

func bd(bundle, cluster string, ready bool, failMsg string) fleet.BundleDeployment {
	d := fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: bundle, Namespace: "c-" + cluster, Labels: map[string]string{
		fleet.BundleNamespaceLabel: "ws", fleet.BundleNameLabel: bundle,
		fleet.ClusterNamespaceLabel: "ws", fleet.ClusterLabel: cluster}},
		Spec:   fleet.BundleDeploymentSpec{DeploymentID: "d1", StagedDeploymentID: "d1"},
		Status: fleet.BundleDeploymentStatus{AppliedDeploymentID: "d1", Ready: ready, NonModified: true}}
	if failMsg != "" {
		d.Status.AppliedDeploymentID = "d0"
		d.Status.Conditions = []metav1.Condition{{Type: fleet.ConditionDeployed, Status: metav1.ConditionFalse, Reason: "Failed", Message: failMsg}}
	}
	return d
}

// snapshot of n clusters (env=prod for even ones) and bundles a and b, with
// b failing on cluster c-1.
func testSnapshot(n int) *Snapshot {
	s := &Snapshot{Bundles: []fleet.Bundle{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "a"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "b"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: "z"}},
	}}
	for i := range n {
		name := fmt.Sprintf("c-%04d", i)
		env := "dev"
		if i%2 == 0 {
			env = "prod"
		}
		s.Clusters = append(s.Clusters, fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: name, Labels: map[string]string{"env": env}},
			Status: fleet.ClusterStatus{Conditions: []metav1.Condition{{Type: fleet.ConditionReady, Status: metav1.ConditionTrue}}}})
		s.Deployments = append(s.Deployments, bd("a", name, true, ""))
		fail := ""
		if i == 1 {
			fail = "no matches for kind NoSuchKind"
		}
		s.Deployments = append(s.Deployments, bd("b", name, true, fail))
	}
	return s
}

func TestBuildMatrix(t *testing.T) {
	g := NewWithT(t)
	s := testSnapshot(1000)

	m := BuildMatrix(s, Filter{Workspace: "ws", Page: 1}, labels.Everything())
	g.Expect(m.Clusters).To(Equal(1000))
	g.Expect(m.Last).To(Equal(20))
	g.Expect(m.Rows).To(HaveLen(PageSize))
	g.Expect(m.Bundles).To(HaveLen(2), "the other workspace's bundle is not a column")
	g.Expect(m.Bundles[1]).To(Equal(MatrixBundle{Namespace: "ws", Name: "b", Ready: 999, Total: 1000}))
	g.Expect(m.Totals).To(Equal(map[fleet.BundleState]int{fleet.Ready: 1999, fleet.ErrApplied: 1}))
	g.Expect(m.Rows[1].Cells[1]).To(Equal(Cell{State: fleet.ErrApplied, Message: "no matches for kind NoSuchKind"}))

	m = BuildMatrix(s, Filter{Workspace: "ws", State: fleet.ErrApplied, Page: 1}, labels.Everything())
	g.Expect(m.Rows).To(HaveLen(1))
	g.Expect(m.Rows[0].Name).To(Equal("c-0001"))

	sel, err := labels.Parse("env=prod")
	g.Expect(err).NotTo(HaveOccurred())
	m = BuildMatrix(s, Filter{Page: 20}, sel)
	g.Expect(m.Clusters).To(Equal(500))
	g.Expect(m.Last).To(Equal(10))
	g.Expect(m.Rows).To(BeEmpty(), "past the last page")

	m = BuildMatrix(s, Filter{Search: "c-099", Page: 1}, labels.Everything())
	g.Expect(m.Clusters).To(Equal(10), "a search naming no bundle searches clusters")
	m = BuildMatrix(s, Filter{Search: "b", Page: 1}, labels.Everything())
	g.Expect(m.Bundles).To(HaveLen(1), "a search naming a bundle keeps its column")
	g.Expect(m.Clusters).To(Equal(1000))
}

func TestParseFilter(t *testing.T) {
	for _, tc := range []struct {
		q       map[string]string
		wantErr string
	}{
		{q: map[string]string{"ws": "a", "label": "env in (a,b)", "state": "Ready", "page": "3", "q": " x "}},
		{q: map[string]string{"label": "=="}, wantErr: `label "==" is not a label selector`},
		{q: map[string]string{"state": "Sideways"}, wantErr: `state "Sideways" is not one of Ready, NotReady`},
		{q: map[string]string{"page": "0"}, wantErr: `page "0" is not a page number`},
		{q: map[string]string{"page": "x"}, wantErr: `page "x" is not a page number`},
	} {
		g := NewWithT(t)
		f, _, err := ParseFilter(func(k string) string { return tc.q[k] })
		if tc.wantErr != "" {
			g.Expect(err).To(MatchError(ContainSubstring(tc.wantErr)))
			continue
		}
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(f).To(Equal(Filter{Workspace: "a", Label: "env in (a,b)", State: fleet.Ready, Page: 3, Search: "x"}))
	}
}

func TestBuildOverview(t *testing.T) {
	g := NewWithT(t)
	s := testSnapshot(30)
	s.Clusters[5].Status.Display.State = fleet.ClusterStateOffline
	o := BuildOverview(s)
	g.Expect(o.Counts).To(HaveLen(4))
	g.Expect(o.Attention).To(HaveLen(2))
	g.Expect(o.Attention[0]).To(HaveField("State", "ErrApplied"), "failures first")
	g.Expect(o.Attention[0].Message).To(ContainSubstring("NoSuchKind"))
	g.Expect(o.Attention[1]).To(HaveField("Name", "c-0005"))
}

func TestSecret(t *testing.T) {
	g := NewWithT(t)
	_, err := Secret("s3cret").Authenticate(t.Context(), "s3cre")
	g.Expect(err).To(MatchError(ErrUnauthenticated))
	_, err = Secret("").Authenticate(t.Context(), "")
	g.Expect(err).To(MatchError(ErrUnauthenticated), "an empty secret accepts nothing")
	u, err := Secret("s3cret").Authenticate(t.Context(), "s3cret")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(u.Name).To(Equal("kubeconfig"))
}

// The clusters list's state filter means what the matrix's does: clusters
// with at least one deployment in that state.
func TestClustersInState(t *testing.T) {
	g := NewWithT(t)
	s := testSnapshot(4)
	g.Expect(clustersInState(s, "")).To(BeNil())
	failed := summaryStateOf(s, "b", "c-0001")
	g.Expect(failed).NotTo(Equal(fleet.Ready))
	g.Expect(clustersInState(s, failed)).To(Equal(map[key]bool{{"ws", "c-0001"}: true}))
	g.Expect(clustersInState(s, fleet.Ready)).To(HaveLen(4), "every cluster has bundle a Ready")
	g.Expect(clustersInState(s, fleet.Modified)).To(BeEmpty())
}

func summaryStateOf(s *Snapshot, bundle, cluster string) fleet.BundleState {
	for i := range s.Deployments {
		d := &s.Deployments[i]
		if d.Labels[fleet.BundleNameLabel] == bundle && d.Labels[fleet.ClusterLabel] == cluster {
			return summary.State(d)
		}
	}
	return ""
}
