package clustergroup

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/conditions"
)

func member(name string, ready bool, sum fleet.BundleSummary) *fleet.Cluster {
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name}}
	c.Status.Summary = sum
	status := metav1.ConditionFalse
	if ready {
		status = metav1.ConditionTrue
	}
	conditions.Set(c, metav1.Condition{Type: fleet.ConditionReady, Status: status, Reason: "x"})
	return c
}

func TestComputeStatus(t *testing.T) {
	allReady := fleet.BundleSummary{DesiredReady: 2, Ready: 2}
	many := make([]*fleet.Cluster, 0, 12)
	for i := range 12 {
		many = append(many, member(fmt.Sprintf("c%02d", i), false, fleet.BundleSummary{}))
	}
	cases := []struct {
		name          string
		members       []*fleet.Cluster
		wantCount     int
		wantNonReady  []string
		wantNonCount  int
		wantClusters  string
		wantBundles   string
		wantReady     metav1.ConditionStatus
		wantReason    string
		wantInMessage string
	}{
		{name: "no members", wantClusters: "0/0", wantBundles: "0/0", wantReady: metav1.ConditionTrue, wantReason: fleet.ReasonReady},
		{name: "every member ready", members: []*fleet.Cluster{member("a", true, allReady), member("b", true, allReady)},
			wantCount: 2, wantClusters: "2/2", wantBundles: "4/4", wantReady: metav1.ConditionTrue, wantReason: fleet.ReasonReady},
		{name: "a member not ready, its deployments ready", members: []*fleet.Cluster{member("b", false, allReady), member("a", true, allReady)},
			wantCount: 2, wantNonReady: []string{"b"}, wantNonCount: 1, wantClusters: "1/2", wantBundles: "4/4",
			wantReady: metav1.ConditionFalse, wantReason: fleet.ReasonNotReady, wantInMessage: "1 cluster(s) not ready: [b]"},
		{name: "a deployment not ready", members: []*fleet.Cluster{member("a", true, fleet.BundleSummary{DesiredReady: 2, Ready: 1, NotReady: 1})},
			wantCount: 1, wantClusters: "1/1", wantBundles: "1/2", wantReady: metav1.ConditionFalse, wantReason: string(fleet.NotReady)},
		{name: "at most ten non-ready clusters are named", members: many, wantCount: 12, wantNonCount: 12,
			wantNonReady: []string{"c00", "c01", "c02", "c03", "c04", "c05", "c06", "c07", "c08", "c09"},
			wantClusters: "0/12", wantBundles: "0/0", wantReady: metav1.ConditionFalse, wantReason: fleet.ReasonNotReady},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			group := &fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "edge", Generation: 3}}
			group.Status.ClusterCount = 99
			computeStatus(group, tc.members)
			st := group.Status
			g.Expect(st.ClusterCount).To(Equal(tc.wantCount))
			g.Expect(st.NonReadyClusterCount).To(Equal(tc.wantNonCount))
			g.Expect(st.NonReadyClusters).To(Equal(tc.wantNonReady))
			g.Expect(st.Display.ReadyClusters).To(Equal(tc.wantClusters))
			g.Expect(st.Display.ReadyBundles).To(Equal(tc.wantBundles))
			c := conditions.Get(group, fleet.ConditionReady)
			g.Expect(c.Status).To(Equal(tc.wantReady))
			g.Expect(c.Reason).To(Equal(tc.wantReason))
			g.Expect(c.Message).To(ContainSubstring(tc.wantInMessage))
			g.Expect(c.ObservedGeneration).To(Equal(int64(3)))
		})
	}
}

func TestComputeStatusSumsResourceCounts(t *testing.T) {
	g := NewWithT(t)
	a, b := member("a", true, fleet.BundleSummary{}), member("b", false, fleet.BundleSummary{})
	a.Status.ResourceCounts = fleet.ResourceCounts{DesiredReady: 2, Ready: 2}
	b.Status.ResourceCounts = fleet.ResourceCounts{DesiredReady: 4, Ready: 1, NotReady: 1, Orphaned: 1, Unknown: 1}
	group := &fleet.ClusterGroup{}
	group.Status.ResourceCounts = fleet.ResourceCounts{Ready: 99}
	computeStatus(group, []*fleet.Cluster{a, b})
	g.Expect(group.Status.ResourceCounts).To(Equal(fleet.ResourceCounts{DesiredReady: 6, Ready: 3, NotReady: 1, Orphaned: 1, Unknown: 1}))
	computeStatus(group, nil)
	g.Expect(group.Status.ResourceCounts).To(Equal(fleet.ResourceCounts{}), "no members, nothing counted")
}
