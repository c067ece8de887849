// Package checkin is an agent's check-in: the coordination.k8s.io Lease
// fleet.AgentLeaseName that the agent renews in its cluster namespace, with
// its own credential (Write, Apply: agent.Heartbeat), and reads back as
// the manager does. The manager folds it into the Cluster's
// status.agent.lastSeen only when something shown changes (controllers/
// cluster), so a consumer that must know whether the agent checks in now
// (the import controller's stale check, Cluster API's FleetAgentReady) asks
// here: the later of the two.
package checkin

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/names"
)

// CacheByObject limits the manager's cache of Leases to the agents'
// check-in Leases: other Leases of the management cluster (leader
// elections, node leases) are never read.
func CacheByObject() cache.ByObject {
	return cache.ByObject{Field: fields.OneTermEqualSelector("metadata.name", fleet.AgentLeaseName)}
}

// RenewTime is when the Lease was last renewed; zero for nil or a Lease
// never renewed.
func RenewTime(lease *coordinationv1.Lease) time.Time {
	if lease == nil || lease.Spec.RenewTime == nil {
		return time.Time{}
	}
	return lease.Spec.RenewTime.Time
}

// Last is the agent's last check-in: its Lease's renewal, or the Cluster's
// status.agent.lastSeen when that is later (written by an agent of an
// earlier version, or by an administrator).
func Last(cluster *fleet.Cluster, lease *coordinationv1.Lease) time.Time {
	seen, renewed := cluster.Status.Agent.LastSeen.Time, RenewTime(lease)
	if renewed.After(seen) {
		return renewed
	}
	return seen
}

// Lease reads the check-in Lease of cluster; nil when its agent has not
// made one.
func Lease(ctx context.Context, r client.Reader, cluster *fleet.Cluster) (*coordinationv1.Lease, error) {
	lease := &coordinationv1.Lease{}
	ns := names.ClusterNamespaceFor(cluster.Namespace, cluster.Name, cluster.Status.Namespace)
	err := r.Get(ctx, types.NamespacedName{Namespace: ns, Name: fleet.AgentLeaseName}, lease)
	if err != nil {
		return nil, client.IgnoreNotFound(err)
	}
	return lease, nil
}

// LastOf reads cluster's Lease and returns Last.
func LastOf(ctx context.Context, r client.Reader, cluster *fleet.Cluster) (time.Time, error) {
	lease, err := Lease(ctx, r, cluster)
	if err != nil {
		return time.Time{}, err
	}
	return Last(cluster, lease), nil
}

// Confirm reads cluster's Lease again past the cache, from live, and
// returns the later of that check-in and cached (what the cache said). A
// consumer about to act on a silent agent (restart it, report it gone)
// calls it first: a cache lags behind the agent's renewals while its
// informer relists or the manager is loaded, and the silence may be the
// cache's. When live is nil or the read fails, cached stands.
func Confirm(ctx context.Context, live client.Reader, cluster *fleet.Cluster, cached time.Time) time.Time {
	if live == nil {
		return cached
	}
	lease, err := Lease(ctx, live, cluster)
	if err != nil {
		log.FromContext(ctx).Info("Could not read the check-in Lease past the cache; the cached check-in stands", "error", err.Error())
		return cached
	}
	if last := Last(cluster, lease); last.After(cached) {
		return last
	}
	return cached
}

// ClusterOfLease maps a check-in Lease to the Cluster of its namespace, by
// the namespace's labels, which the manager wrote when it made the namespace
// (an agent cannot change them; the Lease's own labels are the agent's and
// are not trusted).
func ClusterOfLease(ctx context.Context, r client.Reader, lease client.Object) []reconcile.Request {
	if lease.GetName() != fleet.AgentLeaseName {
		return nil
	}
	ns := &corev1.Namespace{}
	if err := r.Get(ctx, types.NamespacedName{Name: lease.GetNamespace()}, ns); err != nil {
		return nil
	}
	l := ns.Labels
	if l[fleet.ManagedLabel] != "true" || l[fleet.ClusterLabel] == "" || l[fleet.ClusterNamespaceLabel] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: l[fleet.ClusterNamespaceLabel], Name: l[fleet.ClusterLabel]}}}
}
