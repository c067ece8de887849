package bundle

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/target"
)

// cands makes n candidates; state gives each one's (exists, upToDate, state).
func cands(n int, state func(i int) (bool, bool, fleet.BundleState)) []Candidate {
	out := make([]Candidate, n)
	for i := range out {
		exists, upToDate, st := state(i)
		zone := "a"
		if i%2 == 1 {
			zone = "b"
		}
		out[i] = Candidate{Info: &target.ClusterInfo{Name: fmt.Sprintf("c%03d", i), Labels: map[string]string{"zone": zone}},
			Exists: exists, UpToDate: upToDate, State: st}
	}
	return out
}

func count(b []bool) int {
	n := 0
	for _, v := range b {
		if v {
			n++
		}
	}
	return n
}

func readyOld(int) (bool, bool, fleet.BundleState) { return true, false, fleet.Ready }

func TestPlanRollout(t *testing.T) {
	pct := func(s string) *intstr.IntOrString { v := intstr.FromString(s); return &v }
	num := func(n int) *intstr.IntOrString { v := intstr.FromInt32(int32(n)); return &v }
	cases := []struct {
		name       string
		cands      []Candidate
		rs         *fleet.RolloutStrategy
		paused     bool
		deploy     int
		create     int
		more       bool
		partitions int
	}{
		{name: "default: everything at once", cands: cands(10, readyOld), deploy: 10},
		{name: "maxUnavailable 2 of ready clusters", cands: cands(10, readyOld),
			rs: &fleet.RolloutStrategy{MaxUnavailable: num(2)}, deploy: 2},
		{name: "a staged change keeps a cluster available", cands: cands(10, func(i int) (bool, bool, fleet.BundleState) {
			if i == 0 {
				return true, true, fleet.WaitApplied // moved in the last pass
			}
			return true, false, fleet.OutOfSync
		}), rs: &fleet.RolloutStrategy{MaxUnavailable: num(2)}, deploy: 1},
		{name: "modified clusters count as available", cands: cands(10, func(int) (bool, bool, fleet.BundleState) {
			return true, false, fleet.Modified
		}), rs: &fleet.RolloutStrategy{MaxUnavailable: num(2)}, deploy: 2},
		{name: "maxUnavailable 30% counts clusters already not ready", cands: cands(10, func(i int) (bool, bool, fleet.BundleState) {
			if i == 0 {
				return true, true, fleet.NotReady
			}
			return true, false, fleet.Ready
		}), rs: &fleet.RolloutStrategy{MaxUnavailable: pct("30%")}, deploy: 2},
		{name: "broken clusters are updated without budget", cands: cands(4, func(int) (bool, bool, fleet.BundleState) {
			return true, false, fleet.ErrApplied
		}), rs: &fleet.RolloutStrategy{MaxUnavailable: num(1)}, deploy: 4},
		{name: "paused moves nothing but creates", cands: cands(4, func(i int) (bool, bool, fleet.BundleState) {
			if i < 2 {
				return false, false, fleet.Pending
			}
			return true, false, fleet.Ready
		}), paused: true, deploy: 2, create: 2},
		{name: "maxNew 0 creates none, and asks for no further batch", cands: cands(3, func(int) (bool, bool, fleet.BundleState) { return false, false, fleet.Pending }),
			rs: &fleet.RolloutStrategy{MaxNew: ptr.To(0)}},
		{name: "maxNew caps creations", cands: cands(120, func(int) (bool, bool, fleet.BundleState) { return false, false, fleet.Pending }),
			deploy: 50, create: 50, more: true},
		{name: "auto partitions above the threshold, one after the other", cands: cands(300, readyOld),
			rs: &fleet.RolloutStrategy{MaxUnavailable: pct("10%")}, deploy: 7, partitions: 4},
		{name: "auto partitions from 200 clusters on (at 100% each moves at once)", cands: cands(200, readyOld), deploy: 200, partitions: 4},
		{name: "autoPartitionSize 0 turns them off", cands: cands(300, readyOld),
			rs: &fleet.RolloutStrategy{MaxUnavailable: pct("10%"), AutoPartitionSize: num(0)}, deploy: 30},
		{name: "maxUnavailable 0 moves no Ready cluster", cands: cands(10, readyOld),
			rs: &fleet.RolloutStrategy{MaxUnavailable: num(0)}, deploy: 0},
		{name: "explicit partitions: the first, then the next; clusters outside them are left out", cands: cands(10, readyOld),
			rs: &fleet.RolloutStrategy{MaxUnavailable: num(1), Partitions: []fleet.Partition{
				{Name: "canary", ClusterName: "c000"},
				{Name: "zone-b", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "b"}}},
			}}, deploy: 1, partitions: 2},
		{name: "a first deployment creates in the first partition only", cands: cands(10, func(int) (bool, bool, fleet.BundleState) {
			return false, false, fleet.Pending
		}), rs: &fleet.RolloutStrategy{MaxUnavailable: pct("10%"), Partitions: []fleet.Partition{
			{Name: "zone-a", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}},
			{Name: "zone-b", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "b"}}},
		}}, deploy: 5, create: 5, partitions: 2},
		{name: "a done partition lets the next one move", cands: cands(10, func(i int) (bool, bool, fleet.BundleState) {
			if i%2 == 0 {
				return true, true, fleet.Ready // zone a: up to date and Ready
			}
			return true, false, fleet.Ready
		}), rs: &fleet.RolloutStrategy{MaxUnavailable: num(1), Partitions: []fleet.Partition{
			{Name: "zone-a", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}},
			{Name: "zone-b", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "b"}}},
		}}, deploy: 1, partitions: 2},
		{name: "a paused cluster is not moved, and holds no budget", cands: func() []Candidate {
			cs := cands(4, readyOld)
			cs[0].Paused = true
			return cs
		}(), rs: &fleet.RolloutStrategy{MaxUnavailable: num(1)}, deploy: 1},
		{name: "a quoted number is a number, a fractional percentage rounds down", cands: cands(100, readyOld),
			rs: &fleet.RolloutStrategy{MaxUnavailable: pct("5")}, deploy: 5},
		{name: "12.5% of 100", cands: cands(100, readyOld), rs: &fleet.RolloutStrategy{MaxUnavailable: pct("12.5%")}, deploy: 12},
		{name: "a partition over budget holds the next ones", cands: cands(10, func(i int) (bool, bool, fleet.BundleState) {
			if i%2 == 0 && i < 6 {
				return true, true, fleet.NotReady // zone a: three not ready
			}
			return true, false, fleet.Ready
		}), rs: &fleet.RolloutStrategy{MaxUnavailable: num(1), Partitions: []fleet.Partition{
			{Name: "zone-a", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}},
			{Name: "zone-b", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "b"}}},
		}}, deploy: 0, partitions: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			p, err := PlanRollout(tc.cands, tc.rs, tc.paused)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(count(p.Deploy)).To(Equal(tc.deploy))
			g.Expect(count(p.Create)).To(Equal(tc.create))
			g.Expect(p.More).To(Equal(tc.more))
			g.Expect(p.Status.Partitions).To(HaveLen(tc.partitions))
		})
	}
}

func TestPlanRolloutInvalidPartition(t *testing.T) {
	g := NewWithT(t)
	_, err := PlanRollout(cands(2, readyOld), &fleet.RolloutStrategy{Partitions: []fleet.Partition{{Name: "bad",
		ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "x", Operator: "Near"}}}}}}, false)
	g.Expect(err).To(MatchError(ContainSubstring("rolloutStrategy.partitions")))
}

// A paused cluster's agent applies nothing: moving it would hold the budget
// for ever. It is skipped, and the others move.
func TestPlanRolloutSkipsPausedClusters(t *testing.T) {
	g := NewWithT(t)
	cs := cands(4, readyOld)
	cs[0].Paused = true
	num := intstr.FromInt32(1)
	p, err := PlanRollout(cs, &fleet.RolloutStrategy{MaxUnavailable: &num}, false)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(p.Deploy).To(Equal([]bool{false, true, false, false}))
}
