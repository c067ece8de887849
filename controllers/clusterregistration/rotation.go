package clusterregistration

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/ensure"
	"github.com/gitfleet/fleet/internal/names"
)

// Credential rotation: an agent renews its own token before it expires
// (agent/registration). For that, each agent's ServiceAccount may create
// tokens for itself, and for no other ServiceAccount: a Role in the agents'
// namespace naming that ServiceAccount alone, which the agent's
// ServiceAccount is bound to. The API server weighs these bindings only for
// requests in that namespace, which agents make only to renew. The token it
// asks for lasts as long as the one the manager minted; the old one expires
// at its own exp.

// rotationAccessName names the Role and RoleBinding letting the agent of
// ServiceAccount saName renew its token.
func rotationAccessName(saName string) string {
	return names.Limit(saName+"-token", names.MaxNameLength)
}

// rotationAccess is the Role and RoleBinding letting the agent's
// ServiceAccount clusterNS/saName request tokens for itself.
func rotationAccess(clusterNS, saName string) []client.Object {
	meta := metav1.ObjectMeta{Name: rotationAccessName(saName), Namespace: clusterNS}
	return []client.Object{
		&rbacv1.Role{
			ObjectMeta: meta,
			Rules: []rbacv1.PolicyRule{{
				APIGroups: []string{""}, Resources: []string{"serviceaccounts/token"},
				Verbs: []string{"create"}, ResourceNames: []string{saName},
			}},
		},
		&rbacv1.RoleBinding{
			ObjectMeta: meta,
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: meta.Name},
			Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: saName, Namespace: clusterNS}},
		},
	}
}

// reconcileRotationAccess lets the agent of a registration granted before
// keep renewing its token, as long as its ServiceAccount exists (a grant
// writes it with the rest of the agent's access).
func (r *Reconciler) reconcileRotationAccess(ctx context.Context, s *scope) error {
	cluster := s.reg.Status.ClusterName
	if cluster == "" {
		return nil
	}
	saName := names.AgentServiceAccount(s.reg.Namespace, cluster, s.reg.Spec.ClientID, s.reg.Spec.ClientRandom)
	labels := managedLabels(s.reg)
	type place struct{ namespace, sa string }
	places := []place{{r.AgentNamespace, saName}}
	// Earlier versions kept the ServiceAccount in the cluster namespace
	// (one with a shorter hash, before), named after the grant or the
	// registration.
	for _, clusterNS := range []string{names.ClusterNamespace(s.reg.Namespace, cluster), names.LegacyClusterNamespace(s.reg.Namespace, cluster)} {
		places = append(places, place{clusterNS, saName}, place{clusterNS, s.reg.Name})
	}
	for i, p := range places {
		sa := &corev1.ServiceAccount{}
		err := r.Client.Get(ctx, types.NamespacedName{Namespace: p.namespace, Name: p.sa}, sa)
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return err
		case !ensure.Carries(sa, ownerLabels(s.reg)):
			continue // not this registration's: never touched
		}
		if i == 0 {
			labels[fleet.ClusterLabel], labels[fleet.ClusterNamespaceLabel] = cluster, s.reg.Namespace
		}
		return ensureAll(ctx, r.Client, labels, rotationAccess(p.namespace, p.sa))
	}
	return nil // revoked: nothing to renew
}
