package cluster

import (
	"context"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
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
