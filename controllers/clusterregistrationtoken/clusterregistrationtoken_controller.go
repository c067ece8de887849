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
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/yaml"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/satoken"
)

// neverExpires is the bearer token lifetime of tokens without a TTL.
const neverExpires = 10 * 365 * 24 * time.Hour

// Reconciler keeps each token's ServiceAccount, RBAC and values Secret, and
// deletes expired tokens.
type Reconciler struct {
	Client client.Client
	// SystemRegistrationNamespace holds agent credential secrets.
	SystemRegistrationNamespace string
	// APIServerURL and APIServerCA tell agents how to reach this manager; the
	// CLI may replace them in what it prints.
	APIServerURL string
	APIServerCA  []byte
	// Now is the clock (tests may replace it).
	Now func() time.Time
	// Workers is the number of tokens reconciled at once.
	Workers int
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleet.ClusterRegistrationToken{}).
		Owns(&corev1.Secret{}).
		Owns(&corev1.ServiceAccount{}).
		Named("clusterregistrationtoken").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Complete(r)
}

// Reconcile brings one token in line with its spec.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	log := ctrl.LoggerFrom(ctx)
	token := &fleet.ClusterRegistrationToken{}
	if err := r.Client.Get(ctx, req.NamespacedName, token); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !token.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, token)
	}

	expires := Expiry(token)
	if expires != nil && !r.Now().Before(expires.Time) {
		log.Info("Deleting expired registration token", "token", klog.KObj(token), "expired", expires.Time)
		return ctrl.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, token))
	}
	if controllerutil.AddFinalizer(token, fleet.RegistrationTokenFinalizer) {
		if err := r.Client.Update(ctx, token); err != nil {
			return ctrl.Result{}, err
		}
	}

	if err := r.reconcileServiceAccount(ctx, token); err != nil {
		return ctrl.Result{}, err
	}
	secretName, err := r.reconcileSecret(ctx, token, expires)
	if err != nil {
		return ctrl.Result{}, err
	}

	if token.Status.SecretName != secretName || !timesEqual(token.Status.Expires, expires) {
		patch := client.MergeFrom(token.DeepCopy())
		token.Status.SecretName = secretName
		token.Status.Expires = expires
		if err := r.Client.Status().Patch(ctx, token, patch); err != nil {
			return ctrl.Result{}, err
		}
	}
	if expires != nil {
		return ctrl.Result{RequeueAfter: expires.Sub(r.Now()) + 10*time.Millisecond}, nil
	}
	return ctrl.Result{}, nil
}

// Expiry is the moment a token stops working: creation + TTL; nil for never.
func Expiry(token *fleet.ClusterRegistrationToken) *metav1.Time {
	if token.Spec.TTL == nil || token.Spec.TTL.Duration <= 0 {
		return nil
	}
	t := metav1.NewTime(token.CreationTimestamp.Add(token.Spec.TTL.Duration))
	return &t
}

// SecretName is the name of the Secret holding a token's values.
func SecretName(token *fleet.ClusterRegistrationToken) string {
	return token.Name + "-token"
}

// RoleName is the name of the Role that lets a token create registrations.
func RoleName(token *fleet.ClusterRegistrationToken) string {
	return token.Name + "-register"
}

func timesEqual(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Time.Unix() == b.Time.Unix()
}

func (r *Reconciler) labels(token *fleet.ClusterRegistrationToken) map[string]string {
	return map[string]string{fleet.ManagedLabel: "true", fleet.RegistrationTokenLabel: token.Name}
}

func (r *Reconciler) reconcileServiceAccount(ctx context.Context, token *fleet.ClusterRegistrationToken) error {
	meta := func(name string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: name, Namespace: token.Namespace}
	}
	sa := &corev1.ServiceAccount{ObjectMeta: meta(token.Name)}
	role := &rbacv1.Role{ObjectMeta: meta(RoleName(token))}
	binding := &rbacv1.RoleBinding{ObjectMeta: meta(RoleName(token))}
	for _, obj := range []client.Object{sa, role, binding} {
		_, err := controllerutil.CreateOrPatch(ctx, r.Client, obj, func() error {
			obj.SetLabels(r.labels(token))
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
func (r *Reconciler) reconcileSecret(ctx context.Context, token *fleet.ClusterRegistrationToken, expires *metav1.Time) (string, error) {
	name := SecretName(token)
	sa := &corev1.ServiceAccount{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: token.Namespace, Name: token.Name}, sa); err != nil {
		return "", err
	}
	secret := &corev1.Secret{}
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: token.Namespace, Name: name}, secret)
	if err == nil && secret.Annotations[saUIDAnnotation] == string(sa.UID) {
		return name, nil
	}
	if err != nil && !apierrors.IsNotFound(err) {
		return "", err
	}

	lifetime := neverExpires
	if expires != nil {
		lifetime = expires.Sub(r.Now())
	}
	bearer, err := satoken.Mint(ctx, r.Client, token.Namespace, token.Name, lifetime)
	if err != nil {
		return "", err
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
		return "", err
	}
	secret = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: token.Namespace}}
	_, err = controllerutil.CreateOrUpdate(ctx, r.Client, secret, func() error {
		secret.Labels = r.labels(token)
		secret.Annotations = map[string]string{saUIDAnnotation: string(sa.UID)}
		secret.Type = corev1.SecretTypeOpaque
		secret.Data = map[string][]byte{fleet.RegistrationTokenSecretValuesKey: values}
		return controllerutil.SetControllerReference(token, secret, r.Client.Scheme())
	})
	if err != nil {
		return "", fmt.Errorf("writing secret %s for token %s: %w", name, token.Name, err)
	}
	return name, nil
}

// saUIDAnnotation records which ServiceAccount the bearer token was minted for.
const saUIDAnnotation = "fleet.cattle.io/service-account-uid"

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
