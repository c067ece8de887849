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
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/registration"
	"github.com/gitfleet/fleet/internal/satoken"
)

// neverExpires is the bearer token lifetime of tokens without a TTL.
const neverExpires = 10 * 365 * 24 * time.Hour

// saUIDAnnotation records which ServiceAccount the bearer token was minted for.
const saUIDAnnotation = "fleet.cattle.io/service-account-uid"

// valuesIssuedAnnotation, on a token's ServiceAccount, says that values (a
// bearer token) were issued for it: should their Secret go, the
// ServiceAccount is made anew rather than issued a second bearer beside the
// first.
const valuesIssuedAnnotation = "fleet.cattle.io/values-issued"

// SecretName is the name of the Secret holding a token's values.
func SecretName(token *fleet.ClusterRegistrationToken) string {
	return names.RegistrationTokenSecret(token.Name)
}

// RoleName is the name of the Role that lets a token create registrations.
func RoleName(token *fleet.ClusterRegistrationToken) string {
	return token.Name + "-register"
}

func labels(token *fleet.ClusterRegistrationToken) map[string]string {
	return map[string]string{fleet.ManagedLabel: "true", fleet.RegistrationTokenLabel: token.Name}
}

// tokenUIDAnnotation, on a token's ServiceAccount, is the UID of the token
// it was made for: the ServiceAccount lives in another namespace than the
// token, where no owner reference can point at it.
const tokenUIDAnnotation = "fleet.cattle.io/registration-token-uid" //nolint:gosec // G101: an annotation name, not a credential

// serviceAccountKey is where the token's ServiceAccount lives: in the system
// registration namespace, never beside the token. The manager may mint
// tokens only there and in cluster namespaces (the admission policy
// fleet-manager-token-scope says so; RBAC cannot), so a stolen manager
// credential cannot mint a token for a ServiceAccount it did not make.
func (r *Reconciler) serviceAccountKey(token *fleet.ClusterRegistrationToken) types.NamespacedName {
	return types.NamespacedName{Namespace: r.SystemRegistrationNamespace, Name: names.RegistrationTokenServiceAccount(token.Namespace, token.Name)}
}

func serviceAccountLabels(token *fleet.ClusterRegistrationToken) map[string]string {
	l := labels(token)
	l[registration.RequestNamespaceLabel] = token.Namespace
	return l
}

// ownedServiceAccount tells whether sa was made by the manager for token.
func ownedServiceAccount(token *fleet.ClusterRegistrationToken, sa *corev1.ServiceAccount) bool {
	want := serviceAccountLabels(token)
	for k, v := range want {
		if sa.Labels[k] != v {
			return false
		}
	}
	return sa.Annotations[tokenUIDAnnotation] == string(token.UID)
}

// reconcileServiceAccount keeps the token's ServiceAccount and the Role and
// RoleBinding that let it create ClusterRegistrations in the token's
// namespace and get them by name, and nothing else.
func (r *Reconciler) reconcileServiceAccount(ctx context.Context, s *scope) error {
	token := s.token
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: token.Namespace}
	}
	key := r.serviceAccountKey(token)
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}
	role := &rbacv1.Role{ObjectMeta: meta(RoleName(token))}
	binding := &rbacv1.RoleBinding{ObjectMeta: meta(RoleName(token))}
	// Checked all before any is written: a token whose names are taken by
	// somebody else's objects gets nothing made for it.
	for _, obj := range []client.Object{sa, role, binding, &corev1.Secret{ObjectMeta: meta(SecretName(token))}} {
		if err := r.checkOwned(ctx, token, obj); err != nil {
			return err
		}
	}
	_, err := controllerutil.CreateOrPatch(ctx, r.Client, sa, func() error {
		if sa.ResourceVersion != "" && !ownedServiceAccount(token, sa) {
			return notOwned(sa) // made meanwhile by someone else
		}
		sa.Labels = serviceAccountLabels(token)
		issued := sa.Annotations[valuesIssuedAnnotation]
		sa.Annotations = map[string]string{tokenUIDAnnotation: string(token.UID)}
		if issued != "" {
			sa.Annotations[valuesIssuedAnnotation] = issued
		}
		return nil
	})
	if outcome.IsStalling(err) {
		return err
	}
	if err != nil {
		return fmt.Errorf("ensuring ServiceAccount %s for token %s: %w", sa.Name, token.Name, err)
	}
	for _, obj := range []client.Object{role, binding} {
		_, err := controllerutil.CreateOrPatch(ctx, r.Client, obj, func() error {
			if obj.GetResourceVersion() != "" && !owned(token, obj) {
				return notOwned(obj) // made meanwhile by someone else
			}
			obj.SetLabels(labels(token))
			switch o := obj.(type) {
			case *rbacv1.Role:
				o.Rules = []rbacv1.PolicyRule{{
					APIGroups: []string{fleet.GroupVersion.Group},
					Resources: []string{"clusterregistrations"},
					// get, to read the grant sealed to the agent's key in the
					// status; never list or watch, so a token holder finds
					// no other request, and reads only ciphertext in one
					// whose name it learnt.
					Verbs: []string{"create", "get"},
				}}
			case *rbacv1.RoleBinding:
				o.RoleRef = rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}
				o.Subjects = []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: sa.Name, Namespace: sa.Namespace}}
			}
			return controllerutil.SetControllerReference(token, obj, r.Client.Scheme())
		})
		if outcome.IsStalling(err) {
			return err
		}
		if err != nil {
			return fmt.Errorf("ensuring %T %s for token %s: %w", obj, obj.GetName(), token.Name, err)
		}
	}
	return nil
}

// owned tells whether obj, in the token's namespace, was made by the
// manager for token: it carries the managed label and token is its
// controller.
func owned(token *fleet.ClusterRegistrationToken, obj client.Object) bool {
	if sa, ok := obj.(*corev1.ServiceAccount); ok {
		return ownedServiceAccount(token, sa)
	}
	ref := metav1.GetControllerOf(obj)
	return obj.GetLabels()[fleet.ManagedLabel] == "true" && ref != nil && ref.UID == token.UID
}

// checkOwned refuses a token whose objects' names are taken by objects the
// manager did not make for it.
func (r *Reconciler) checkOwned(ctx context.Context, token *fleet.ClusterRegistrationToken, obj client.Object) error {
	have := obj.DeepCopyObject().(client.Object)
	if err := r.reader(obj).Get(ctx, client.ObjectKeyFromObject(obj), have); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !owned(token, have) {
		return notOwned(obj)
	}
	return nil
}

// reader reads obj: Secrets uncached, as the manager's cache holds none of
// the tokens' namespaces (controllers.CacheOptions), the rest from the
// cache.
func (r *Reconciler) reader(obj client.Object) client.Reader {
	if _, ok := obj.(*corev1.Secret); ok {
		return r.APIReader
	}
	return r.Client
}

func notOwned(obj client.Object) error {
	return outcome.Stallf(fleet.ReasonNotOwned,
		"%T %s/%s exists and was not made by fleet for this token: the token cannot be issued under its name, and fleet leaves that object alone; delete this token and make one with another name",
		obj, obj.GetNamespace(), obj.GetName())
}

// reconcileSecret writes the values Secret once; the bearer token in it is
// minted when the Secret is created, or again when the ServiceAccount was
// recreated (its old tokens are dead).
func (r *Reconciler) reconcileSecret(ctx context.Context, s *scope) error {
	token := s.token
	name := SecretName(token)
	sa := &corev1.ServiceAccount{}
	if err := r.Client.Get(ctx, r.serviceAccountKey(token), sa); err != nil {
		return err
	}
	secret := &corev1.Secret{}
	err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: token.Namespace, Name: name}, secret)
	if !owned(token, sa) {
		return notOwned(sa)
	}
	if err == nil && !owned(token, secret) {
		return notOwned(secret)
	}
	if err == nil && secret.Annotations[saUIDAnnotation] == string(sa.UID) {
		s.secretName = name
		if sa.Annotations[valuesIssuedAnnotation] == "" {
			// Values issued by an earlier version, which did not mark
			// the ServiceAccount: marked now, so that they are revoked
			// too should their Secret go.
			patch := client.MergeFrom(sa.DeepCopy())
			metav1.SetMetaDataAnnotation(&sa.ObjectMeta, valuesIssuedAnnotation, "true")
			if err := r.Client.Patch(ctx, sa, patch); err != nil {
				return fmt.Errorf("marking the ServiceAccount of token %s: %w", token.Name, err)
			}
		}
		return nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if sa.Annotations[valuesIssuedAnnotation] != "" {
		// Values were issued for this ServiceAccount, and their Secret is
		// gone (deleted, or lost in a restore): whoever holds them may still
		// register, and the manager could no longer check their proof
		// (registration.TokenProof). The ServiceAccount is made anew, so
		// that those values stop working, and new ones are issued for it.
		uid := sa.UID
		if err := r.Client.Delete(ctx, sa, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("revoking the values of token %s, whose Secret %s is gone: %w", token.Name, name, err)
		}
		// Expected: the ServiceAccount's deletion brings the token back;
		// looked at again shortly in case its event is missed.
		return outcome.Waitf(fleet.ReasonReissuing, time.Second, "the values Secret %s of token %s is gone: its ServiceAccount is made anew, which revokes the values handed out before, and new values are issued", name, token.Name)
	}
	// Marked before the values exist, so that values minted but never
	// stored are revoked as well.
	patch := client.MergeFrom(sa.DeepCopy())
	metav1.SetMetaDataAnnotation(&sa.ObjectMeta, valuesIssuedAnnotation, "true")
	if err := r.Client.Patch(ctx, sa, patch); err != nil {
		return fmt.Errorf("marking the ServiceAccount of token %s: %w", token.Name, err)
	}

	lifetime := neverExpires
	if s.expires != nil {
		lifetime = s.expires.Sub(r.Now())
	}
	bearer, err := satoken.Mint(ctx, r.Client, sa.Namespace, sa.Name, lifetime)
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
	if err := r.writeSecret(ctx, token, secret, sa, values); err != nil {
		return fmt.Errorf("writing secret %s for token %s: %w", name, token.Name, err)
	}
	s.secretName = name
	return nil
}

// writeSecret writes the token's values into its Secret: have, as read
// uncached, or a new one when have was not found (no resourceVersion).
func (r *Reconciler) writeSecret(ctx context.Context, token *fleet.ClusterRegistrationToken, have *corev1.Secret, sa *corev1.ServiceAccount, values []byte) error {
	if have.ResourceVersion != "" && !owned(token, have) {
		return notOwned(have)
	}
	secret := have.DeepCopy()
	secret.Name, secret.Namespace = SecretName(token), token.Namespace
	secret.Labels = labels(token)
	secret.Annotations = map[string]string{saUIDAnnotation: string(sa.UID)}
	secret.Type = corev1.SecretTypeOpaque
	secret.Data = map[string][]byte{fleet.RegistrationTokenSecretValuesKey: values}
	if err := controllerutil.SetControllerReference(token, secret, r.Client.Scheme()); err != nil {
		return err
	}
	if secret.ResourceVersion == "" {
		return r.Client.Create(ctx, secret)
	}
	// The resourceVersion read makes a concurrent change fail the update.
	return r.Client.Update(ctx, secret)
}

// reconcileDelete revokes the token by deleting what it owns (nothing it
// does not), and takes back at once the credentials granted with it that
// wait for their agents: a deleted or expired token must not keep holding
// places of the bound on waiting credentials.
func (r *Reconciler) reconcileDelete(ctx context.Context, token *fleet.ClusterRegistrationToken) error {
	if !controllerutil.ContainsFinalizer(token, fleet.RegistrationTokenFinalizer) {
		return nil
	}
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: token.Namespace}
	}
	key := r.serviceAccountKey(token)
	for _, obj := range []client.Object{
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}},
		&rbacv1.RoleBinding{ObjectMeta: meta(RoleName(token))},
		&rbacv1.Role{ObjectMeta: meta(RoleName(token))},
		&corev1.Secret{ObjectMeta: meta(SecretName(token))},
	} {
		if err := r.reader(obj).Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return err
		}
		if !owned(token, obj) {
			continue
		}
		uid := obj.GetUID()
		if err := r.Client.Delete(ctx, obj, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("revoking token %s: deleting %T %s: %w", token.Name, obj, obj.GetName(), err)
		}
	}
	if err := r.withdrawPending(ctx, token); err != nil {
		return err
	}
	controllerutil.RemoveFinalizer(token, fleet.RegistrationTokenFinalizer)
	return client.IgnoreNotFound(r.Client.Update(ctx, token))
}

// withdrawPending deletes the credential secrets granted with token that
// no agent fetched yet, and the Roles and RoleBindings letting the token
// read them (each named after its secret).
func (r *Reconciler) withdrawPending(ctx context.Context, token *fleet.ClusterRegistrationToken) error {
	sel := client.MatchingLabels{fleet.ManagedLabel: "true", fleet.RegistrationTokenLabel: token.Name, registration.RequestNamespaceLabel: token.Namespace}
	bindings := &rbacv1.RoleBindingList{}
	if err := r.Client.List(ctx, bindings, client.InNamespace(r.SystemRegistrationNamespace), sel); err != nil {
		return err
	}
	secrets := &corev1.SecretList{}
	if err := r.Client.List(ctx, secrets, client.InNamespace(r.SystemRegistrationNamespace), sel); err != nil {
		return err
	}
	pending := map[string]bool{}
	for _, b := range bindings.Items {
		pending[b.Name] = true
	}
	for _, s := range secrets.Items {
		pending[s.Name] = true
	}
	for name := range pending {
		meta := metav1.ObjectMeta{Name: name, Namespace: r.SystemRegistrationNamespace}
		for _, obj := range []client.Object{&corev1.Secret{ObjectMeta: meta}, &rbacv1.RoleBinding{ObjectMeta: meta}, &rbacv1.Role{ObjectMeta: meta}} {
			if err := r.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
				return fmt.Errorf("revoking token %s: withdrawing the credential %s waiting for its agent: %w", token.Name, name, err)
			}
		}
	}
	return nil
}
