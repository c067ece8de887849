package notification

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	notification "github.com/gitfleet/fleet/api/notification/v1alpha1"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func keys(ds []due) []string {
	out := make([]string, 0, len(ds))
	for _, d := range ds {
		k := d.key
		if !d.send {
			k += "(quiet)"
		}
		out = append(out, k)
	}
	return out
}

func TestDueEvents(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	start := metav1.NewTime(now.Add(-10 * time.Minute))
	rec := func(sent ...string) notification.RolloutRecord {
		return notification.RolloutRecord{Revision: "c1", StartedAt: start, Sent: sent}
	}
	two := []partition{{name: "canary", reached: true}, {name: "rest"}}
	all := wantedEvents([]notification.Event{notification.EventStarted, notification.EventPartitionReached,
		notification.EventSucceeded, notification.EventFailed, notification.EventStalled})
	tests := []struct {
		name     string
		r        rollout
		rec      notification.RolloutRecord
		wanted   map[notification.Event]bool
		deadline time.Duration
		want     []string
		after    time.Duration
	}{
		{name: "not current: nothing but the deadline", r: rollout{}, rec: rec(), deadline: 30 * time.Minute, want: []string{}, after: 20 * time.Minute},
		{name: "current and progressing: started", r: rollout{current: true}, rec: rec(), deadline: 30 * time.Minute,
			want: []string{"Started"}, after: 20 * time.Minute},
		{name: "started already sent", r: rollout{current: true}, rec: rec("Started"), deadline: time.Hour, want: []string{}, after: 50 * time.Minute},
		{name: "fast rollout: started then succeeded", r: rollout{current: true, phase: succeeded}, rec: rec(), want: []string{"Started", "Succeeded"}},
		{name: "failure", r: rollout{current: true, phase: failed}, rec: rec("Started"), want: []string{"Failed"}},
		{name: "failure told once", r: rollout{current: true, phase: failed}, rec: rec("Started", "Failed"), want: []string{}},
		{name: "recovery after a failure", r: rollout{current: true, phase: succeeded}, rec: rec("Started", "Failed"), want: []string{"Succeeded"}},
		{name: "nothing after succeeded, even a failure (flapping)", r: rollout{current: true, phase: failed}, rec: rec("Started", "Succeeded"), want: []string{}},
		{name: "stalled past the deadline", r: rollout{current: true}, rec: rec("Started"), deadline: 5 * time.Minute, want: []string{"Stalled"}},
		{name: "stalled once", r: rollout{current: true}, rec: rec("Started", "Stalled"), deadline: 5 * time.Minute, want: []string{}},
		{name: "no stall after a failure", r: rollout{current: true, phase: failed}, rec: rec("Started", "Failed"), deadline: time.Minute, want: []string{}},
		{name: "partition reached", r: rollout{current: true, partitions: two}, rec: rec("Started"), deadline: time.Hour, wanted: all,
			want: []string{"PartitionReached/canary"}, after: 50 * time.Minute},
		{name: "partitions not told when the rollout is done", r: rollout{current: true, phase: succeeded, partitions: two}, rec: rec("Started"),
			wanted: all, want: []string{"Succeeded"}},
		{name: "unwanted events are recorded quietly", r: rollout{current: true, partitions: two}, rec: rec(), deadline: time.Hour,
			want: []string{"Started", "PartitionReached/canary(quiet)"}, after: 50 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			wanted := tt.wanted
			if wanted == nil {
				wanted = wantedEvents(nil)
			}
			d, after := dueEvents(tt.r, tt.rec, wanted, now, tt.deadline)
			g.Expect(keys(d)).To(Equal(tt.want))
			g.Expect(after).To(Equal(tt.after))
		})
	}
}

func bundle(name, commit string, gen, observed int64, sum fleet.BundleSummary) fleet.Bundle {
	return fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: gen, Labels: map[string]string{fleet.CommitLabel: commit}},
		Status: fleet.BundleStatus{ObservedGeneration: observed, Summary: sum}}
}

func TestObserve(t *testing.T) {
	src := source{kind: notification.KindGitRepo, name: "app", revision: "c2"}
	ready := fleet.BundleSummary{DesiredReady: 3, Ready: 3}
	errApplied := fleet.BundleSummary{DesiredReady: 3, Ready: 2, ErrApplied: 1,
		NonReadyResources: []fleet.NonReadyResource{{Name: "ns/edge-9", State: fleet.ErrApplied, Message: "boom"}}}
	tests := []struct {
		name    string
		bundles []fleet.Bundle
		current bool
		phase   phase
		errors  int
	}{
		{name: "no bundles yet", current: false},
		{name: "a bundle still of the previous commit", bundles: []fleet.Bundle{bundle("a", "c2", 2, 2, ready), bundle("b", "c1", 1, 1, ready)},
			current: false, phase: succeeded},
		{name: "a bundle whose status is of its previous spec", bundles: []fleet.Bundle{bundle("a", "c2", 3, 2, ready)}, current: false, phase: succeeded},
		{name: "all current and ready", bundles: []fleet.Bundle{bundle("a", "c2", 2, 2, ready), bundle("b", "c2", 1, 1, ready)}, current: true, phase: succeeded},
		{name: "one cluster failed", bundles: []fleet.Bundle{bundle("a", "c2", 2, 2, ready), bundle("b", "c2", 1, 1, errApplied)},
			current: true, phase: failed, errors: 1},
		{name: "waiting", bundles: []fleet.Bundle{bundle("a", "c2", 2, 2, fleet.BundleSummary{DesiredReady: 3, Ready: 1, WaitApplied: 2})},
			current: true, phase: progressing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			r := observe(src, tt.bundles)
			g.Expect(r.current).To(Equal(tt.current))
			if len(tt.bundles) > 0 {
				g.Expect(r.phase).To(Equal(tt.phase))
			}
			g.Expect(r.errors).To(HaveLen(tt.errors))
		})
	}
}

func TestPartitionsReachedOverEveryBundle(t *testing.T) {
	g := NewWithT(t)
	part := func(name string, count, ready int) fleet.PartitionStatus {
		return fleet.PartitionStatus{Name: name, Count: count, Summary: fleet.BundleSummary{Ready: ready}}
	}
	a := fleet.Bundle{Status: fleet.BundleStatus{Partitions: []fleet.PartitionStatus{part("p0", 2, 2), part("p1", 5, 1)}}}
	b := fleet.Bundle{Status: fleet.BundleStatus{Partitions: []fleet.PartitionStatus{part("p0", 2, 1), part("p1", 5, 5)}}}
	c := fleet.Bundle{Status: fleet.BundleStatus{Partitions: []fleet.PartitionStatus{part("p0", 2, 2), part("p1", 5, 5)}}}
	g.Expect(partitions([]fleet.Bundle{a, b})).To(Equal([]partition{{name: "p0"}, {name: "p1"}}))
	g.Expect(partitions([]fleet.Bundle{a, c})).To(Equal([]partition{{name: "p0", reached: true}, {name: "p1"}}))
}

// A source first seen with its rollout over is recorded as told; a new
// revision starts a new record; a source no longer selected is dropped.
func TestRecords(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	old := []notification.RolloutRecord{
		{Kind: notification.KindGitRepo, Name: "kept", Revision: "c1", Sent: []string{"Started"}},
		{Kind: notification.KindGitRepo, Name: "moved", Revision: "c1", Sent: []string{"Started", "Succeeded"}},
		{Kind: notification.KindGitRepo, Name: "gone", Revision: "c1"},
	}
	got := records(old, []rollout{
		{source: source{kind: notification.KindGitRepo, name: "kept", revision: "c1"}},
		{source: source{kind: notification.KindGitRepo, name: "moved", revision: "c2"}},
		{source: source{kind: notification.KindHelmOp, name: "new-done", revision: "1.2.3"}, current: true, phase: succeeded},
		{source: source{kind: notification.KindHelmOp, name: "new-running", revision: "1.2.3"}, current: true},
		{source: source{kind: notification.KindHelmOp, name: "no-revision"}},
	}, now)
	g.Expect(got).To(Equal([]notification.RolloutRecord{
		old[0],
		{Kind: notification.KindGitRepo, Name: "moved", Revision: "c2", StartedAt: metav1.NewTime(now)},
		{Kind: notification.KindHelmOp, Name: "new-done", Revision: "1.2.3", StartedAt: metav1.NewTime(now), Sent: []string{"Started", "Succeeded"}},
		{Kind: notification.KindHelmOp, Name: "new-running", Revision: "1.2.3", StartedAt: metav1.NewTime(now)},
	}))
}
