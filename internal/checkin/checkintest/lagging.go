// Package checkintest helps test consumers of agents' check-ins.
package checkintest

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Lagging is a client whose reads of agents' check-ins lag behind the API
// server, as a manager's cache does while its informer relists: each
// renewal of a check-in Lease, and each Cluster's status.agent.lastSeen,
// reads as if it were made Lag earlier. Everything else passes through.
type Lagging struct {
	client.Client
	Lag time.Duration
}

// Get reads obj; a check-in is moved Lag into the past.
func (l Lagging) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := l.Client.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	switch o := obj.(type) {
	case *coordinationv1.Lease:
		if o.Spec.RenewTime != nil {
			o.Spec.RenewTime = &metav1.MicroTime{Time: o.Spec.RenewTime.Add(-l.Lag)}
		}
	case *fleet.Cluster:
		if seen := o.Status.Agent.LastSeen; !seen.IsZero() {
			o.Status.Agent.LastSeen = metav1.NewTime(seen.Add(-l.Lag))
		}
	}
	return nil
}
