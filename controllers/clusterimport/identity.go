package clusterimport

import (
	"context"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// Keys of the agent's credential Secret downstream (agent/upstream)
// that name the Cluster it is registered as.
const (
	agentSecretNamespaceKey   = "namespace"
	agentSecretClusterNameKey = "clusterName"
)

// reconcileElsewhere keeps one downstream cluster one Fleet Cluster across
// namespaces. Clusters of other namespaces with the same identity are
// looked at (none, in the usual case, and nothing downstream is read); one
// whose agent runs in the downstream cluster — its credential Secret there,
// read through this Cluster's kubeconfig, names that Cluster — holds the
// cluster: this import installs nothing, and the Cluster reports
// IdentityConflict naming it. Installing would hand the agent a token of
// this namespace: it would leave the other Cluster, whose bundles it would
// uninstall, for this one, a move between tenants nobody asked for.
//
// A clientID claimed by a Cluster of another namespace with no agent
// downstream behind it holds nothing: a tenant cannot block another's
// enrolment by copying a clientID, which anyone who reads Clusters knows.
func (r *Reconciler) reconcileElsewhere(ctx context.Context, s *scope) error {
	if s.local {
		return nil
	}
	c := s.cluster
	list := &fleet.ClusterList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{fleet.ClientIDIndex: s.clientID}); err != nil {
		return err
	}
	for i := range list.Items {
		other := &list.Items[i]
		if other.Namespace == c.Namespace || !other.DeletionTimestamp.IsZero() || other.Spec.ClientID != s.clientID ||
			other.Annotations[fleet.CAPIMovedAnnotation] != "" {
			continue
		}
		holds, where, err := r.agentRegisteredAs(ctx, s, other)
		if err != nil {
			return err
		}
		if holds {
			// Looked at again every CheckInterval (at most a minute): deleting
			// that Cluster lets this import go on without anyone touching it.
			return outcome.Waitf(fleet.ReasonIdentityConflict, min(r.CheckInterval, time.Minute),
				"the cluster this kubeconfig reaches (clientID %s) is already Fleet Cluster %s/%s: its agent (credential %s downstream) is registered there. "+
					"One downstream cluster is one Fleet Cluster, so nothing was installed and that agent keeps working. "+
					"To manage the cluster from namespace %s instead, delete Cluster %s/%s (its bundles are removed from the cluster); this import then goes on by itself",
				s.clientID, other.Namespace, other.Name, where, c.Namespace, other.Namespace, other.Name)
		}
	}
	return nil
}

// agentRegisteredAs tells whether the agent's credential Secret downstream,
// in this import's agent namespace or the one the other Cluster's agent
// reported, names other. A kubeconfig that may not read it proves nothing
// either way: the import goes on, as it did before this check.
func (r *Reconciler) agentRegisteredAs(ctx context.Context, s *scope, other *fleet.Cluster) (bool, string, error) {
	namespaces := []string{r.agentNamespace(s.cluster)}
	if ns := other.Status.Agent.Namespace; ns != "" && ns != namespaces[0] {
		namespaces = append(namespaces, ns)
	}
	sort.Strings(namespaces)
	for _, ns := range namespaces {
		key := types.NamespacedName{Namespace: ns, Name: fleet.AgentName}
		secret := &corev1.Secret{}
		err := r.call(ctx, func(ctx context.Context) error { return s.remote.Get(ctx, key, secret) })
		switch {
		case apierrors.IsNotFound(err) || apierrors.IsForbidden(err):
			continue
		case err != nil:
			return false, "", remoteFailure("reading the agent's credential Secret "+key.String(), err)
		}
		if string(secret.Data[agentSecretNamespaceKey]) == other.Namespace && string(secret.Data[agentSecretClusterNameKey]) == other.Name {
			return true, key.String(), nil
		}
	}
	return false, "", nil
}
