package bundle

import (
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/event"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// A Cluster's window opening or closing (status only) retargets its
// bundles; other status writes (an agent's check-in) do not.
func TestWindowChangedPassesOnlyWindowMoves(t *testing.T) {
	g := NewWithT(t)
	cluster := func(scheduled, active bool, seen string) *fleet.Cluster {
		c := &fleet.Cluster{}
		c.Status.Scheduled, c.Status.ActiveSchedule = scheduled, active
		c.Status.Display.State = seen
		return c
	}
	update := func(before, after *fleet.Cluster) bool {
		return windowChanged.Update(event.UpdateEvent{ObjectOld: before, ObjectNew: after})
	}
	g.Expect(update(cluster(false, false, ""), cluster(true, false, ""))).To(BeTrue(), "a Schedule starts holding the cluster")
	g.Expect(update(cluster(true, false, ""), cluster(true, true, ""))).To(BeTrue(), "the window opens")
	g.Expect(update(cluster(true, true, ""), cluster(true, false, ""))).To(BeTrue(), "the window closes")
	g.Expect(update(cluster(true, true, ""), cluster(false, false, ""))).To(BeFalse(), "deployable before and after")
	g.Expect(update(cluster(true, false, "a"), cluster(true, false, "b"))).To(BeFalse(), "another status change")
}
