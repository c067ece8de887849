package clusterregistration

import (
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/internal/names"
)

// Credential rotation as earlier versions granted it: each agent's
// ServiceAccount could create tokens for itself, through a Role naming that
// ServiceAccount alone and a RoleBinding, two objects per agent. Agents now
// get their next token from the manager (renewal.go); revoking a
// registration granted then deletes these.

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
