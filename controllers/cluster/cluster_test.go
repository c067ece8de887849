package cluster

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/event"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/checkin"
)

func TestPredicates(t *testing.T) {
	g := NewWithT(t)
	old := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", ResourceVersion: "1", Labels: map[string]string{"env": "dev"}}}
	old.Status.Agent.LastSeen = metav1.NewTime(time.Unix(100, 0))
	beat := old.DeepCopy()
	beat.ResourceVersion = "2"
	beat.Status.Agent.LastSeen = metav1.NewTime(time.Unix(200, 0))

	upd := func(o, n *fleet.Cluster) event.UpdateEvent { return event.UpdateEvent{ObjectOld: o, ObjectNew: n} }
	g.Expect(CheckInPredicate().Update(upd(old, beat))).To(BeFalse())
	first := old.DeepCopy()
	first.Status.Agent.LastSeen = metav1.Time{}
	g.Expect(CheckInPredicate().Update(upd(first, beat))).To(BeTrue(), "the first check-in")
	offline := old.DeepCopy()
	offline.Status.Display.State = fleet.ClusterStateOffline
	back := offline.DeepCopy()
	back.Status.Agent.LastSeen = metav1.NewTime(time.Unix(300, 0))
	g.Expect(CheckInPredicate().Update(upd(offline, back))).To(BeTrue(), "an Offline cluster checking in again")
}

func TestComputeStatus(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := &fleet.Cluster{}
	computeStatus(c, "ns", nil, time.Time{}, now, time.Minute)
	g.Expect(c.Status.Display.State).To(Equal(fleet.ClusterStateWaitCheckIn))
	checkIn := now.Add(-time.Minute)
	computeStatus(c, "ns", []fleet.BundleDeployment{{}}, checkIn, now, time.Minute)
	g.Expect(c.Status.Display.ReadyBundles).To(Equal("0/1"))
	g.Expect(c.Status.Namespace).To(Equal("ns"))
	g.Expect(c.Status.Display.State).NotTo(Equal(fleet.ClusterStateOffline), "silent for exactly the limit")

	computeStatus(c, "ns", []fleet.BundleDeployment{{}}, checkIn, now.Add(time.Second), time.Minute)
	g.Expect(c.Status.Display.State).To(Equal(fleet.ClusterStateOffline))
	ready := meta.FindStatusCondition(c.Status.Conditions, fleet.ConditionReady)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(fleet.ClusterStateOffline))
	g.Expect(ready.Message).To(ContainSubstring("not checked in since 2026-01-02T03:03:05Z"))

	computeStatus(c, "ns", []fleet.BundleDeployment{{}}, now, now.Add(time.Second), time.Minute)
	g.Expect(c.Status.Display.State).NotTo(Equal(fleet.ClusterStateOffline), "back after a check-in")
}

func TestOwnedStatusSendsZeroCounts(t *testing.T) {
	g := NewWithT(t)
	// A cluster whose deployments are all gone: its summary is all zero,
	// and must still be sent with fields (an empty object would be stored
	// as null by server-side apply, and refused).
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "fleet-default"}}
	c.Status.Summary = fleet.BundleSummary{DesiredReady: 3, Ready: 3}
	c.Status.Conditions = []metav1.Condition{{Type: fleet.ConditionImported, Status: metav1.ConditionTrue, Reason: fleet.ReasonApplied}}
	computeStatus(c, "cluster-ns", nil, time.Time{}, time.Now(), time.Hour)
	raw, err := json.Marshal(ownedStatus(c))
	g.Expect(err).NotTo(HaveOccurred())
	var applied map[string]any
	g.Expect(json.Unmarshal(raw, &applied)).To(Succeed())
	g.Expect(applied).To(HaveKeyWithValue("summary", map[string]any{"desiredReady": 0.0, "ready": 0.0}))
	g.Expect(applied).To(HaveKeyWithValue("namespace", "cluster-ns"))
	g.Expect(applied).To(HaveKeyWithValue("readyGitRepos", 0.0))
	g.Expect(applied).To(HaveKeyWithValue("desiredReadyGitRepos", 0.0))
	g.Expect(applied).To(HaveKeyWithValue("resourceCounts", HaveKeyWithValue("desiredReady", 0.0)))
	g.Expect(string(raw)).NotTo(ContainSubstring("null"))
	g.Expect(string(raw)).NotTo(ContainSubstring(fleet.ConditionImported), "the import controller owns Imported")

	fresh := &fleet.Cluster{}
	raw, err = json.Marshal(ownedStatus(fresh))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(raw)).NotTo(ContainSubstring("display"), "an empty display is not sent")
}

func TestOfflineCheck(t *testing.T) {
	now := time.Unix(10000, 0)
	seen := func(ago time.Duration, state string) *fleet.Cluster {
		c := &fleet.Cluster{}
		if ago >= 0 {
			c.Status.Agent.LastSeen = metav1.NewTime(now.Add(-ago))
		}
		c.Status.Display.State = state
		return c
	}
	cases := []struct {
		name    string
		cluster *fleet.Cluster
		want    time.Duration
	}{
		{name: "never checked in", cluster: seen(-1, fleet.ClusterStateWaitCheckIn), want: 0},
		{name: "offline already", cluster: seen(time.Hour, fleet.ClusterStateOffline), want: 0},
		{name: "checked in a minute ago", cluster: seen(time.Minute, string(fleet.Ready)), want: 4*time.Minute + time.Second},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(offlineCheck(tc.cluster, tc.cluster.Status.Agent.LastSeen.Time, now, 5*time.Minute)).To(Equal(tc.want))
		})
	}
}

func TestGitRepoAndResourceCounts(t *testing.T) {
	bd := func(repo, ns string, ready bool, counts fleet.ResourceCounts) *fleet.BundleDeployment {
		b := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{fleet.RepoLabel: repo, fleet.BundleNamespaceLabel: ns}}}
		b.Spec.DeploymentID, b.Spec.StagedDeploymentID = "s:1", "s:1"
		b.Status.AppliedDeploymentID, b.Status.Ready, b.Status.NonModified = "s:1", ready, true
		b.Status.ResourceCounts = counts
		if repo == "" {
			delete(b.Labels, fleet.RepoLabel)
		}
		return b
	}
	one := fleet.ResourceCounts{DesiredReady: 1, Ready: 1}
	notReady := fleet.ResourceCounts{DesiredReady: 2, Ready: 1, NotReady: 1}
	cases := []struct {
		name                 string
		bds                  []*fleet.BundleDeployment
		wantReady, wantTotal int
		wantCounts           fleet.ResourceCounts
	}{
		{name: "none"},
		{name: "two bundles of one repo, both ready", bds: []*fleet.BundleDeployment{bd("a", "ws", true, one), bd("a", "ws", true, one)},
			wantReady: 1, wantTotal: 1, wantCounts: fleet.ResourceCounts{DesiredReady: 2, Ready: 2}},
		{name: "one bundle of a repo not ready", bds: []*fleet.BundleDeployment{bd("a", "ws", true, one), bd("a", "ws", false, notReady), bd("b", "ws", true, one)},
			wantReady: 1, wantTotal: 2, wantCounts: fleet.ResourceCounts{DesiredReady: 4, Ready: 3, NotReady: 1}},
		{name: "same repo name in two workspaces", bds: []*fleet.BundleDeployment{bd("a", "ws1", true, one), bd("a", "ws2", false, notReady)},
			wantReady: 1, wantTotal: 2, wantCounts: fleet.ResourceCounts{DesiredReady: 3, Ready: 2, NotReady: 1}},
		{name: "a bundle not from a GitRepo counts resources only", bds: []*fleet.BundleDeployment{bd("", "ws", true, one)},
			wantCounts: one},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			ready, total := sourceCounts(tc.bds, fleet.RepoLabel)
			g.Expect([]int{ready, total}).To(Equal([]int{tc.wantReady, tc.wantTotal}))
			// The same deployments made by HelmOps count as HelmOps.
			helm := make([]*fleet.BundleDeployment, len(tc.bds))
			for i, bd := range tc.bds {
				helm[i] = bd.DeepCopy()
				if repo, ok := helm[i].Labels[fleet.RepoLabel]; ok {
					delete(helm[i].Labels, fleet.RepoLabel)
					helm[i].Labels[fleet.HelmOpLabel] = repo
				}
			}
			ready, total = sourceCounts(helm, fleet.HelmOpLabel)
			g.Expect([]int{ready, total}).To(Equal([]int{tc.wantReady, tc.wantTotal}))
			ready, total = sourceCounts(helm, fleet.RepoLabel)
			g.Expect([]int{ready, total}).To(Equal([]int{0, 0}), "HelmOps are no GitRepos")
			g.Expect(resourceCounts(tc.bds)).To(Equal(tc.wantCounts))
		})
	}
}

func TestFoldCheckIn(t *testing.T) {
	g := NewWithT(t)
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	lease := func(renewed time.Time, agentNS string) *coordinationv1.Lease {
		l := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: renewed}}}
		if agentNS != "" {
			l.Annotations = map[string]string{fleet.AgentNamespaceAnnotation: agentNS}
		}
		return l
	}
	st := fleet.ClusterStatus{}
	g.Expect(foldCheckIn(st, nil, time.Hour)).To(Equal(st.Agent), "no Lease: nothing changes")

	first := foldCheckIn(st, lease(t0.Add(300*time.Millisecond), "fleet-system"), time.Hour)
	g.Expect(first.LastSeen.Time).To(Equal(t0), "the first check-in is written, to the second")
	g.Expect(first.Namespace).To(Equal("fleet-system"))

	st.Agent = first
	st.Display.State = string(fleet.Ready)
	g.Expect(foldCheckIn(st, lease(t0.Add(59*time.Minute), "fleet-system"), time.Hour)).To(Equal(st.Agent),
		"a heartbeat within the refresh interval writes nothing")
	g.Expect(foldCheckIn(st, lease(t0.Add(time.Hour), "fleet-system"), time.Hour).LastSeen.Time).To(Equal(t0.Add(time.Hour)),
		"lastSeen is refreshed once it is an interval old")
	g.Expect(foldCheckIn(st, lease(t0.Add(-time.Hour), "fleet-system"), time.Hour)).To(Equal(st.Agent), "an older renewal never goes back")

	st.Display.State = fleet.ClusterStateOffline
	back := foldCheckIn(st, lease(t0.Add(time.Minute), "fleet-system"), time.Hour)
	g.Expect(back.LastSeen.Time).To(Equal(t0.Add(time.Minute)), "an Offline cluster's check-in is written at once")

	st.Display.State = string(fleet.Ready)
	g.Expect(foldCheckIn(st, lease(t0.Add(time.Minute), "fleet-other"), time.Hour).Namespace).To(Equal("fleet-other"),
		"a changed agent namespace is written")
}

func TestOfflineFromLease(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	// lastSeen an hour old (not refreshed since), the Lease renewed a
	// minute ago: the cluster is online, and comes back when it would turn
	// Offline without a renewal.
	c := &fleet.Cluster{}
	c.Status.Agent.LastSeen = metav1.NewTime(now.Add(-time.Hour))
	l := &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: now.Add(-time.Minute)}}}
	checkIn := checkin.Last(c, l)
	computeStatus(c, "ns", []fleet.BundleDeployment{}, checkIn, now, 45*time.Minute)
	g.Expect(c.Status.Display.State).NotTo(Equal(fleet.ClusterStateOffline))
	g.Expect(offlineCheck(c, checkIn, now, 45*time.Minute)).To(Equal(44*time.Minute + time.Second))
	computeStatus(c, "ns", []fleet.BundleDeployment{}, checkIn, now.Add(46*time.Minute), 45*time.Minute)
	g.Expect(c.Status.Display.State).To(Equal(fleet.ClusterStateOffline), "the Lease not renewed for longer than offlineAfter")
}

// TestSummaryWritesCoalesced: a change of the deployments' summary alone
// (their counts, and the state they decide) is held back SummaryInterval
// from when it was first held and from the cluster's last write; a rollout
// that starts, SummaryHold from when it was first held, and while the
// summary written and the new one both show a rollout under way,
// SummaryHold from the last write; a first check-in, Offline or a failure
// is written at once.
func TestSummaryWritesCoalesced(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1000, 0)
	r := &Reconciler{SummaryInterval: 5 * time.Second, SummaryHold: time.Minute}
	key := types.NamespacedName{Namespace: "ws", Name: "edge"}
	base := &fleet.Cluster{}
	base.Status.Namespace = "cluster-ns"
	base.Status.Agent.LastSeen = metav1.NewTime(now.Add(-time.Minute))
	base.Status.Display = fleet.ClusterDisplay{ReadyBundles: "1/3", State: string(fleet.NotReady)}
	base.Status.Summary = fleet.BundleSummary{DesiredReady: 3, Ready: 1, NotReady: 2}
	meta.SetStatusCondition(&base.Status.Conditions, metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: "NotReady", Message: "NotReady(2)"})
	meta.SetStatusCondition(&base.Status.Conditions, metav1.Condition{Type: fleet.ConditionProcessed, Status: metav1.ConditionTrue, Reason: "Processed"})

	counted := base.DeepCopy()
	counted.Status.Summary = fleet.BundleSummary{DesiredReady: 3, Ready: 2, NotReady: 1}
	counted.Status.Display.ReadyBundles = "2/3"
	meta.SetStatusCondition(&counted.Status.Conditions, metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: "NotReady", Message: "NotReady(1)"})
	g.Expect(r.summaryWait(key, ownedStatus(base), ownedStatus(counted), now)).To(Equal(5*time.Second), "never written by this process: the interval from when it was first held")
	g.Expect(r.summaryWait(key, ownedStatus(base), ownedStatus(counted), now.Add(2*time.Second))).To(Equal(3*time.Second), "held 2s ago: 3s more")
	g.Expect(r.summaryWait(key, ownedStatus(base), ownedStatus(counted), now.Add(5*time.Second))).To(BeNumerically("<=", 0), "held for the interval")
	r.held.Delete(key)

	r.written.Store(key, now.Add(-2*time.Second))
	g.Expect(r.summaryWait(key, ownedStatus(base), ownedStatus(counted), now)).To(Equal(5*time.Second), "first held now")
	r.held.Store(key, now.Add(-time.Minute))
	g.Expect(r.summaryWait(key, ownedStatus(base), ownedStatus(counted), now)).To(Equal(3*time.Second), "held long, written 2s ago: 3s more")
	g.Expect(r.summaryWait(key, ownedStatus(base), ownedStatus(counted), now.Add(4*time.Second))).To(BeNumerically("<=", 0), "once the interval is over")

	ready := counted.DeepCopy()
	ready.Status.Summary = fleet.BundleSummary{DesiredReady: 3, Ready: 3}
	ready.Status.Display = fleet.ClusterDisplay{ReadyBundles: "3/3", State: string(fleet.Ready)}
	meta.SetStatusCondition(&ready.Status.Conditions, metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionTrue, Reason: "Ready"})
	g.Expect(r.summaryWait(key, ownedStatus(counted), ownedStatus(ready), now)).To(Equal(3*time.Second), "turning Ready: its deployments decide it too")

	// A rollout: the summary written shows deployments in flight.
	rolling := ready.DeepCopy()
	rolling.Status.Summary = fleet.BundleSummary{DesiredReady: 3, Ready: 1, WaitApplied: 2}
	rolling.Status.Display = fleet.ClusterDisplay{ReadyBundles: "1/3", State: string(fleet.WaitApplied)}
	meta.SetStatusCondition(&rolling.Status.Conditions, metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: "WaitApplied", Message: "WaitApplied(2)"})
	r.held.Delete(key)
	g.Expect(r.summaryWait(key, ownedStatus(ready), ownedStatus(rolling), now)).To(Equal(time.Minute), "a rollout starting: until it lands or the hold is over")
	erring := rolling.DeepCopy()
	erring.Status.Summary = fleet.BundleSummary{DesiredReady: 3, Ready: 1, WaitApplied: 1, ErrApplied: 1}
	erring.Status.Display = fleet.ClusterDisplay{ReadyBundles: "1/3", State: string(fleet.ErrApplied)}
	g.Expect(r.summaryWait(key, ownedStatus(ready), ownedStatus(erring), now)).To(Equal(5*time.Second), "a rollout starting with a failure: the interval from when it was first held")
	r.held.Store(key, now.Add(-59*time.Second))
	g.Expect(r.summaryWait(key, ownedStatus(ready), ownedStatus(rolling), now)).To(Equal(3*time.Second), "a rollout held nearly SummaryHold: no sooner than the interval from the last write")
	r.held.Store(key, now.Add(-time.Minute))
	g.Expect(r.summaryWait(key, ownedStatus(ready), ownedStatus(rolling), now.Add(3*time.Second))).To(BeNumerically("<=", 0), "a rollout held for SummaryHold, the interval over: written")
	r.held.Store(key, now.Add(-time.Minute))
	step := rolling.DeepCopy()
	step.Status.Summary = fleet.BundleSummary{DesiredReady: 3, Ready: 2, WaitApplied: 1}
	step.Status.Display.ReadyBundles = "2/3"
	g.Expect(r.summaryWait(key, ownedStatus(rolling), ownedStatus(step), now)).To(Equal(58*time.Second), "a step of the rollout: until it lands or the hold is over")
	staged := rolling.DeepCopy()
	staged.Status.Summary = fleet.BundleSummary{DesiredReady: 3, Ready: 1, OutOfSync: 2}
	g.Expect(r.summaryWait(key, ownedStatus(staged), ownedStatus(step), now)).To(Equal(58*time.Second), "staged deployments deployed: still rolling out")
	g.Expect(r.summaryWait(key, ownedStatus(rolling), ownedStatus(ready), now)).To(Equal(3*time.Second), "the rollout landed")

	offline := counted.DeepCopy()
	offline.Status.Display.State = fleet.ClusterStateOffline
	g.Expect(r.summaryWait(key, ownedStatus(base), ownedStatus(offline), now)).To(BeZero(), "turning Offline")
	seen := counted.DeepCopy()
	seen.Status.Agent.LastSeen = metav1.NewTime(now)
	g.Expect(r.summaryWait(key, ownedStatus(base), ownedStatus(seen), now)).To(BeZero(), "a lastSeen refresh")
	failed := counted.DeepCopy()
	meta.SetStatusCondition(&failed.Status.Conditions, metav1.Condition{Type: fleet.ConditionProcessed, Status: metav1.ConditionFalse, Reason: "Error"})
	g.Expect(r.summaryWait(key, ownedStatus(base), ownedStatus(failed), now)).To(BeZero(), "a failure to process")
	waiting := base.DeepCopy()
	waiting.Status.Display.State = fleet.ClusterStateWaitCheckIn
	g.Expect(r.summaryWait(key, ownedStatus(waiting), ownedStatus(counted), now)).To(BeZero(), "the first check-in")
}
