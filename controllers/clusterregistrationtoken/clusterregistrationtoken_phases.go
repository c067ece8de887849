package clusterregistrationtoken

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/satoken"
)

// neverExpires is the bearer token lifetime of tokens without a TTL.
const neverExpires = 10 * 365 * 24 * time.Hour

// saUIDAnnotation records which ServiceAccount the bearer token was minted for.
const saUIDAnnotation = "fleet.cattle.io/service-account-uid"

// SecretName is the name of the Secret holding a token's values.
func SecretName(token *fleet.ClusterRegistrationToken) string {
	return token.Name + "-token"
}

// RoleName is the name of the Role that lets a token create registrations.
func RoleName(token *fleet.ClusterRegistrationToken) string {
	return token.Name + "-register"
}

func labels(token *fleet.ClusterRegistrationToken) map[string]string {
	return map[string]string{fleet.ManagedLabel: "true", fleet.RegistrationTokenLabel: token.Name}
}

// reconcileServiceAccount keeps the token's ServiceAccount and the Role and
// RoleBinding that let it create ClusterRegistrations, and nothing else.
func (r *Reconciler) reconcileServiceAccount(ctx context.Context, s *scope) error {
	token := s.token
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: token.Namespace}
	}
	sa := &corev1.ServiceAccount{ObjectMeta: meta(token.Name)}
	role := &rbacv1.Role{ObjectMeta: meta(RoleName(token))}
	binding := &rbacv1.RoleBinding{ObjectMeta: meta(RoleName(token))}
	for _, obj := range []client.Object{sa, role, binding} {
		_, err := controllerutil.CreateOrPatch(ctx, r.Client, obj, func() error {
			obj.SetLabels(labels(token))
			switch o := obj.(type) {
			case *rbacv1.Role:
				o.Rules = []rbacv1.PolicyRule{{
					APIGroups: []string{fleet.GroupVersion.Group},
					Resources: []string{"clusterregistrations"},
					Verbs:     []string{"create"},
				}}
			case *rbacv1.RoleBinding:
				o.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}
				o.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}}
			}
			return controllerutil.SetControllerReference(token, obj, r.Client.Scheme())
		})
		if err != nil {
			return fmt.Errorf("ensuring %T %s for token %s: %w", obj, obj.GetName(), token.Name, err)
		}
	}
	return nil
}

// reconcileSecret writes the values Secret once; the bearer token in it is
// minted when the Secret is created, or again when the ServiceAccount was
// recreated (its old tokens are dead).
func (r *Reconciler) reconcileSecret(ctx context.Context, s *scope) error {
	token := s.token
	name := SecretName(token)
	sa := &corev1.ServiceAccount{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: token.Namespace, Name: token.Name}, sa); err != nil {
		return err
	}
	secret := &corev1.Secret{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: token.Namespace, Name: name}, secret)
	if err == nil && secret.Annotations[saUIDAnnotation] == string(sa.UID) {
		s.secretName = name
		return nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}

	lifetime := neverExpires
	if s.expires != nil {
		lifetime = s.expires.Sub(r.Now())
	}
	bearer, err := satoken.Mint(ctx, r.Client, token.Namespace, token.Name, lifetime)
	if err != nil {
		return err
	}
	values, err := yaml.Marshal(agentinstall.Bootstrap{
		APIServerURL:                r.APIServerURL,
		APIServerCA:                 string(r.APIServerCA),
		Token:                       bearer,
		ClusterNamespace:            token.Namespace,
		SystemRegistrationNamespace: r.SystemRegistrationNamespace,
		TokenName:                   token.Name,
	})
	if err != nil {
		return err
	}
	secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: token.Namespace}}
	_, err = controllerutil.CreateOrUpdate(ctx, r.Client, secret, func() error {
		secret.Labels = labels(token)
		secret.Annotations = map[string]string{saUIDAnnotation: string(sa.UID)}
		secret.Type = corev1.SecretTypeOpaque
		secret.Data = map[string][]byte{fleet.RegistrationTokenSecretValuesKey: values}
		return controllerutil.SetControllerReference(token, secret, r.Client.Scheme())
	})
	if err != nil {
		return fmt.Errorf("writing secret %s for token %s: %w", name, token.Name, err)
	}
	s.secretName = name
	return nil
}

// reconcileDelete revokes the token by deleting what it owns.
func (r *Reconciler) reconcileDelete(ctx context.Context, token *fleet.ClusterRegistrationToken) error {
	if !controllerutil.ContainsFinalizer(token, fleet.RegistrationTokenFinalizer) {
		return nil
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: token.Namespace}
	}
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: meta(token.Name)},
		&rbacv1.RoleBinding{ObjectMeta: meta(RoleName(token))},
		&rbacv1.Role{ObjectMeta: meta(RoleName(token))},
		&corev1.Secret{ObjectMeta: meta(SecretName(token))},
	} {
		if err := r.Client.Delete(ctx, obj); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("revoking token %s: deleting %T %s: %w", token.Name, obj, obj.GetName(), err)
		}
	}
	controllerutil.RemoveFinalizer(token, fleet.RegistrationTokenFinalizer)
	return client.IgnoreNotFound(r.Client.Update(ctx, token))
}
