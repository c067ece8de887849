package enqueue

import (
	"maps"
	"slices"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// IgnoreHeartbeats drops Cluster updates whose only change is an agent's
// check-in (status.agent.lastSeen): with thousands of agents checking in, a
// heartbeat must cost the controllers that watch Clusters nothing. It
// compares in place, copying nothing but the status struct itself.
func IgnoreHeartbeats() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*fleet.Cluster)
		n, ok2 := e.ObjectNew.(*fleet.Cluster)
		if !ok1 || !ok2 {
			return true
		}
		if o.Status.Agent.LastSeen.Equal(&n.Status.Agent.LastSeen) {
			return true
		}
		if o.Generation != n.Generation || !maps.Equal(o.Labels, n.Labels) || !maps.Equal(o.Annotations, n.Annotations) ||
			o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() || !slices.Equal(o.Finalizers, n.Finalizers) {
			return true
		}
		os, ns := o.Status, n.Status // shallow: only the check-in time is changed, and only in the copy
		os.Agent.LastSeen = ns.Agent.LastSeen
		return !equality.Semantic.DeepEqual(os, ns)
	}}
}
