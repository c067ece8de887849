package agent

import (
	"context"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/backoff"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/checkin"
)

// Heartbeat renews the agent's check-in Lease (fleet.AgentLeaseName in its
// cluster namespace upstream): once at start, then every Interval. The
// manager folds it into the Cluster's status.agent, writing the Cluster only
// when what it shows changes; the agent itself has no right on its Cluster,
// nor anything else in the workspace namespace.
type Heartbeat struct {
	Client client.Client
	// ClusterNamespace is the agent's cluster namespace upstream.
	ClusterNamespace string
	// AgentNamespace, when set, is the agent's downstream namespace,
	// reported on the Lease.
	AgentNamespace string
	Interval       time.Duration
	// SealingKey, when set, is the agent's current sealing public key,
	// published on the Lease (fleet.SealingKeyAnnotation).
	SealingKey func() string
	// MinBackoff and MaxBackoff bound retries of a failed check-in.
	MinBackoff, MaxBackoff time.Duration

	// checkedIn is whether a check-in of this Heartbeat succeeded: the
	// Lease is then known to exist.
	checkedIn atomic.Bool
}

// Run checks in until ctx ends.
func (h *Heartbeat) Run(ctx context.Context) {
	backoff.Repeat(ctx, backoff.New(h.MinBackoff, h.MaxBackoff), h.Interval, "Check-in failed, retrying", func(ctx context.Context) (time.Duration, error) {
		return h.Interval, h.Beat(ctx)
	})
}

// Beat sends one check-in, one request that the API server accepts whether
// the Lease exists or not: the first, not knowing, applies the Lease
// (server-side apply creates it when missing, with the agent's rights to
// create Leases and patch its own); the next ones, the Lease known to
// exist, merge-patch it (see checkin.Write), which costs the API
// server less.
func (h *Heartbeat) Beat(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	now := metav1.NowMicro()
	seconds := int32(max(h.Interval/time.Second, 1))
	holder := fleet.AgentName
	var annotations map[string]string
	if h.AgentNamespace != "" {
		annotations = map[string]string{fleet.AgentNamespaceAnnotation: h.AgentNamespace}
		holder = h.AgentNamespace + "/" + fleet.AgentName
	}
	if h.SealingKey != nil {
		if annotations == nil {
			annotations = map[string]string{}
		}
		annotations[fleet.SealingKeyAnnotation] = h.SealingKey()
	}
	spec := coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: &now}
	write := checkin.Apply
	if h.checkedIn.Load() {
		write = checkin.Write
	}
	if err := write(ctx, h.Client, h.ClusterNamespace, spec, annotations); err != nil {
		return err
	}
	h.checkedIn.Store(true)
	return nil
}
