package schedule

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/target"
)

func TestEvaluateAndClusterStatus(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 5, 4, 10, 0, 10, 0, time.UTC)
	clusters := []*target.ClusterInfo{
		{Name: "a", Namespace: "ws"},
		{Name: "b", Namespace: "ws", Labels: map[string]string{"env": "edge"}},
		{Name: "c", Namespace: "ws", Groups: []target.GroupInfo{{Name: "canary", Labels: map[string]string{"tier": "1"}}}},
		{Name: "d", Namespace: "ws"},
	}
	sched := func(name, cron string, targets ...fleet.ScheduleTarget) *fleet.Schedule {
		return &fleet.Schedule{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ws", Generation: 3}, Spec: fleet.ScheduleSpec{
			Schedule: cron, Duration: metav1.Duration{Duration: 30 * time.Second}, Location: "UTC",
			Targets: fleet.ScheduleTargets{Clusters: targets}}}
	}
	open := sched("open", "0 * * * * *", fleet.ScheduleTarget{ClusterName: "a"}, fleet.ScheduleTarget{ClusterGroupSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "1"}}})
	shut := sched("shut", "40 * * * * *", fleet.ScheduleTarget{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "edge"}}}, fleet.ScheduleTarget{ClusterName: "a"})
	bad := sched("bad", "0 * * * * *", fleet.ScheduleTarget{ClusterName: "d"}, fleet.ScheduleTarget{ClusterSelector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Like"}}}})

	evs := []Evaluation{Evaluate(open, clusters, now), Evaluate(shut, clusters, now), Evaluate(bad, clusters, now)}
	g.Expect(evs[0].Err).NotTo(HaveOccurred())
	g.Expect(evs[0].Matching).To(Equal([]string{"a", "c"}))
	g.Expect(evs[0].Window.Active).To(BeTrue())
	g.Expect(evs[1].Matching).To(Equal([]string{"a", "b"}))
	g.Expect(evs[1].Window.Active).To(BeFalse())
	g.Expect(outcome.IsStalling(evs[2].Err)).To(BeTrue())
	g.Expect(outcome.ReasonOf(evs[2].Err, "")).To(Equal(fleet.ReasonInvalidSelector))
	g.Expect(evs[2].Err.Error()).To(HavePrefix("schedule ws/bad: spec.targets.clusters[1]: clusterSelector"))

	g.Expect(ClusterStatus(evs)).To(Equal(map[string]ClusterFields{
		"a": {Scheduled: true, ActiveSchedule: true}, // one of its windows is open
		"b": {Scheduled: true},
		"c": {Scheduled: true, ActiveSchedule: true},
		// d: only the invalid Schedule names it, which holds nothing
	}))
	// The open window shuts at 10:00:30, before the other opens at 10:00:40.
	g.Expect(NextChange(evs)).To(Equal(time.Date(2026, 5, 4, 10, 0, 30, 0, time.UTC)))

	ComputeStatus(open, evs[0])
	g.Expect(open.Status.Active).To(BeTrue())
	g.Expect(open.Status.MatchingClusters).To(Equal([]string{"a", "c"}))
	g.Expect(open.Status.NextStartTime.Time).To(Equal(time.Date(2026, 5, 4, 10, 1, 0, 0, time.UTC)))
	g.Expect(open.Status.ObservedGeneration).To(Equal(int64(3)))
	ComputeStatus(bad, evs[2])
	g.Expect(bad.Status.Active).To(BeFalse())
	g.Expect(bad.Status.MatchingClusters).To(BeNil())
	g.Expect(bad.Status.NextStartTime.IsZero()).To(BeTrue())
}
