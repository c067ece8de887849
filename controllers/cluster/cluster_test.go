package cluster

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/event"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
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
	ComputeStatus(c, "ns", nil, now, time.Minute)
	g.Expect(c.Status.Display.State).To(Equal(fleet.ClusterStateWaitCheckIn))
	c.Status.Agent.LastSeen = metav1.NewTime(now.Add(-time.Minute))
	ComputeStatus(c, "ns", []fleet.BundleDeployment{{}}, now, time.Minute)
	g.Expect(c.Status.Display.ReadyBundles).To(Equal("0/1"))
	g.Expect(c.Status.Namespace).To(Equal("ns"))
	g.Expect(c.Status.Display.State).NotTo(Equal(fleet.ClusterStateOffline), "silent for exactly the limit")

	ComputeStatus(c, "ns", []fleet.BundleDeployment{{}}, now.Add(time.Second), time.Minute)
	g.Expect(c.Status.Display.State).To(Equal(fleet.ClusterStateOffline))
	ready := meta.FindStatusCondition(c.Status.Conditions, fleet.ConditionReady)
	g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
	g.Expect(ready.Reason).To(Equal(fleet.ClusterStateOffline))
	g.Expect(ready.Message).To(ContainSubstring("not checked in since 2026-01-02T03:03:05Z"))

	c.Status.Agent.LastSeen = metav1.NewTime(now)
	ComputeStatus(c, "ns", []fleet.BundleDeployment{{}}, now.Add(time.Second), time.Minute)
	g.Expect(c.Status.Display.State).NotTo(Equal(fleet.ClusterStateOffline), "back after a check-in")
}

func TestStatusApplySendsZeroCounts(t *testing.T) {
	g := NewWithT(t)
	// A cluster whose deployments are all gone: its summary is all zero,
	// and must still be sent with fields (an empty object would be stored
	// as null by server-side apply, and refused).
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "fleet-default"}}
	c.Status.Summary = fleet.BundleSummary{DesiredReady: 3, Ready: 3}
	ComputeStatus(c, "cluster-ns", nil, time.Now(), time.Hour)
	u, err := StatusApply(c)
	g.Expect(err).NotTo(HaveOccurred())
	summary, found, err := unstructured.NestedMap(u.Object, "status", "summary")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(found).To(BeTrue())
	g.Expect(summary).To(HaveKeyWithValue("desiredReady", int64(0)))
	g.Expect(summary).To(HaveKeyWithValue("ready", int64(0)))
	raw, err := json.Marshal(u.Object)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(raw)).NotTo(ContainSubstring("null"))
}
