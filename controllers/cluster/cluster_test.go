package cluster

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	relabel := old.DeepCopy()
	relabel.Labels["env"] = "prod"
	summary := beat.DeepCopy()
	summary.Status.Summary.Ready = 3

	upd := func(o, n *fleet.Cluster) event.UpdateEvent { return event.UpdateEvent{ObjectOld: o, ObjectNew: n} }
	g.Expect(IgnoreHeartbeats().Update(upd(old, beat))).To(BeFalse(), "a heartbeat alone")
	g.Expect(IgnoreHeartbeats().Update(upd(old, relabel))).To(BeTrue())
	g.Expect(IgnoreHeartbeats().Update(upd(old, summary))).To(BeTrue(), "a heartbeat with a status change")
	g.Expect(CheckInPredicate().Update(upd(old, beat))).To(BeFalse())
	first := old.DeepCopy()
	first.Status.Agent.LastSeen = metav1.Time{}
	g.Expect(CheckInPredicate().Update(upd(first, beat))).To(BeTrue(), "the first check-in")
}

func TestComputeStatus(t *testing.T) {
	g := NewWithT(t)
	c := &fleet.Cluster{}
	ComputeStatus(c, "ns", nil)
	g.Expect(c.Status.Display.State).To(Equal(fleet.ClusterStateWaitCheckIn))
	c.Status.Agent.LastSeen = metav1.Now()
	ComputeStatus(c, "ns", []fleet.BundleDeployment{{}})
	g.Expect(c.Status.Display.ReadyBundles).To(Equal("0/1"))
	g.Expect(c.Status.Namespace).To(Equal("ns"))
}
