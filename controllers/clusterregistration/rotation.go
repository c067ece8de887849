package clusterregistration

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/internal/ensure"
	"github.com/gitfleet/fleet/internal/names"
)

// Credential rotation: an agent renews its own token before it expires
// (agent/registration). For that, each agent's ServiceAccount may create
// tokens for itself, and for no other ServiceAccount: a Role in its cluster
// namespace naming that ServiceAccount alone, which the agent's
// ServiceAccount is bound to. The token it asks for lasts as long as the one
// the manager minted; the old one expires at its own exp.

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

// reconcileRotationAccess lets the agent renew its token: in a grant, right
// after the rest of its access; for a registration granted before (by a
// manager that did not give this right), as long as its ServiceAccount
// exists.
func (r *Reconciler) reconcileRotationAccess(ctx context.Context, s *scope) error {
	if s.clusterNS != "" { // granting: the ServiceAccount was just made
		return ensureAll(ctx, r.Client, managedLabels(s.reg), rotationAccess(s.clusterNS, s.saName))
	}
	cluster := s.reg.Status.ClusterName
	if cluster == "" {
		return nil
	}
	// The ServiceAccount is named after the grant; earlier versions named
	// it after the registration, in a namespace with a shorter hash.
	for _, clusterNS := range []string{names.ClusterNamespace(s.reg.Namespace, cluster), names.LegacyClusterNamespace(s.reg.Namespace, cluster)} {
		for _, saName := range []string{names.AgentServiceAccount(s.reg.Namespace, cluster, s.reg.Spec.ClientID, s.reg.Spec.ClientRandom), s.reg.Name} {
			sa := &corev1.ServiceAccount{}
			err := r.Client.Get(ctx, types.NamespacedName{Namespace: clusterNS, Name: saName}, sa)
			switch {
			case apierrors.IsNotFound(err):
				continue
			case err != nil:
				return err
			case !ensure.Carries(sa, ownerLabels(s.reg)):
				continue // not this registration's: never touched
			}
			return ensureAll(ctx, r.Client, managedLabels(s.reg), rotationAccess(clusterNS, saName))
		}
	}
	return nil // revoked: nothing to renew
}
