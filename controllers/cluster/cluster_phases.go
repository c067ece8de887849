package cluster

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/internal/ensure"
)

// ensureNamespace creates the cluster namespace, where the bundle controller
// writes the cluster's BundleDeployments and the agent reads them.
func (r *Reconciler) ensureNamespace(ctx context.Context, s *scope) error {
	err := ensure.Namespace(ctx, r.Client, s.namespace, map[string]string{
		fleet.ManagedLabel: "true", fleet.ClusterLabel: s.cluster.Name, fleet.ClusterNamespaceLabel: s.cluster.Namespace,
	})
	if err != nil {
		return fmt.Errorf("ensuring namespace %s for cluster %s: %w", s.namespace, s.cluster.Name, err)
	}
	return nil
}

// readCheckIn reads the agent's check-in Lease, which finish folds into the
// status.
func (r *Reconciler) readCheckIn(ctx context.Context, s *scope) error {
	lease, err := checkin.Lease(ctx, r.Client, s.cluster)
	if err != nil {
		return fmt.Errorf("reading the check-in Lease of cluster %s: %w", s.cluster.Name, err)
	}
	s.lease = lease
	return nil
}

// confirmOffline reads the check-in Lease again from the API server when the
// cached one would turn a cluster Offline that is not: Offline is an alarm,
// raised at once, and the cache may lag behind the agent's last renewal (its
// informer relisting after an API server restart, a loaded manager). A cluster
// already Offline, or never checked in, costs no read; nor does a steady
// heartbeat. When the read fails, the cached Lease decides.
func (r *Reconciler) confirmOffline(ctx context.Context, s *scope) {
	checkIn := checkin.Last(s.cluster, s.lease)
	if r.APIReader == nil || s.deployments == nil || checkIn.IsZero() ||
		s.cluster.Status.Display.State == fleet.ClusterStateOffline || s.now.Sub(checkIn) <= r.offlineAfter() {
		return
	}
	lease, err := checkin.Lease(ctx, r.APIReader, s.cluster)
	if err != nil {
		ctrl.LoggerFrom(ctx).Info("Could not read the check-in Lease past the cache; the cached one says the cluster is Offline", "error", err.Error())
		return
	}
	if lease != nil {
		s.lease = lease
	}
}

// revokeAgents deletes the ServiceAccounts of the Cluster's agents, and
// their right to renew their tokens: they live in the agents' namespace, not
// in the cluster namespace that goes with the Cluster, and their group may
// read Contents. Only what the registration controller made for this
// Cluster, as its labels say, is deleted.
func (r *Reconciler) revokeAgents(ctx context.Context, s *scope) error {
	if r.AgentNamespace == "" {
		return nil
	}
	sel := client.MatchingLabels{fleet.ManagedLabel: "true", fleet.ClusterLabel: s.cluster.Name, fleet.ClusterNamespaceLabel: s.cluster.Namespace}
	for _, obj := range []client.Object{&corev1.ServiceAccount{}, &rbacv1.RoleBinding{}, &rbacv1.Role{}} {
		if err := r.Client.DeleteAllOf(ctx, obj, client.InNamespace(r.AgentNamespace), sel); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("revoking the agents of cluster %s (%T in %s): %w", s.cluster.Name, obj, r.AgentNamespace, err)
		}
	}
	return nil
}

// listDeployments reads the cluster's BundleDeployments, for its status.
func (r *Reconciler) listDeployments(ctx context.Context, s *scope) error {
	bds := &fleet.BundleDeploymentList{}
	if err := r.Client.List(ctx, bds, client.InNamespace(s.namespace)); err != nil {
		return fmt.Errorf("listing the BundleDeployments of cluster %s: %w", s.cluster.Name, err)
	}
	s.deployments = bds.Items
	if s.deployments == nil {
		s.deployments = []fleet.BundleDeployment{}
	}
	return nil
}
