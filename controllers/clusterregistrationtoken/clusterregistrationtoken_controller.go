package clusterregistrationtoken

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/registration"
	"github.com/gitfleet/fleet/internal/secretmeta"
)

// Reconciler keeps each token's ServiceAccount, RBAC and values Secret, and
// deletes expired tokens.
type Reconciler struct {
	Client client.Client
	// SystemRegistrationNamespace holds agent credential secrets and the
	// tokens' ServiceAccounts.
	SystemRegistrationNamespace string
	// APIServerURL and APIServerCA tell agents how to reach this manager; the
	// CLI may replace them in what it prints.
	APIServerURL string
	APIServerCA  []byte
	// Now is the clock (tests may replace it).
	Now func() time.Time
	// Workers is the number of tokens reconciled at once.
	Workers int
	// APIReader reads the tokens' values Secrets, uncached: they live in
	// the tokens' namespaces, whose Secrets the manager's cache does not
	// hold (controllers.CacheOptions). Default the manager's API reader.
	APIReader client.Reader
	// Secrets watches the metadata of Secrets, so that a values Secret
	// changed or deleted brings its token back (default: a watch of its
	// own).
	Secrets *secretmeta.Watch
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.SystemRegistrationNamespace == "" {
		return fmt.Errorf("the registration token controller needs the system registration namespace, where tokens' ServiceAccounts live")
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Secrets == nil {
		var err error
		if r.Secrets, err = secretmeta.ForManager(mgr); err != nil {
			return err
		}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleet.ClusterRegistrationToken{}).
		WatchesRawSource(r.Secrets.Source(handler.TypedEnqueueRequestsFromMapFunc(tokenOfSecret))).
		Watches(&corev1.ServiceAccount{}, handler.EnqueueRequestsFromMapFunc(r.tokenOfServiceAccount)).
		Named("clusterregistrationtoken").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Complete(r)
}

// tokenOfSecret maps a token's values Secret, named after the token and
// labelled with its name, to the token of its namespace. The labels are
// anyone's to set: they only bring a token of that namespace to be looked
// at, which reads its Secret afresh and trusts only what it made.
func tokenOfSecret(_ context.Context, obj *metav1.PartialObjectMetadata) []reconcile.Request {
	l := obj.GetLabels()
	name := l[fleet.RegistrationTokenLabel]
	if l[fleet.ManagedLabel] != "true" || name == "" || obj.GetName() != names.RegistrationTokenSecret(name) {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: obj.GetNamespace(), Name: name}}}
}

// tokenOfServiceAccount maps a token's ServiceAccount, in the system
// registration namespace, to its token: a deleted ServiceAccount is made
// again, and the token re-issued.
func (r *Reconciler) tokenOfServiceAccount(_ context.Context, obj client.Object) []reconcile.Request {
	l := obj.GetLabels()
	if obj.GetNamespace() != r.SystemRegistrationNamespace || l[fleet.ManagedLabel] != "true" ||
		l[fleet.RegistrationTokenLabel] == "" || l[registration.RequestNamespaceLabel] == "" {
		return nil
	}
	return []reconcile.Request{{NamespacedName: types.NamespacedName{
		Namespace: l[registration.RequestNamespaceLabel], Name: l[fleet.RegistrationTokenLabel]}}}
}

// scope is what the phases of one reconcile share.
type scope struct {
	token *fleet.ClusterRegistrationToken
	// expires is when the token stops working; nil for never.
	expires *metav1.Time
	// secretName is set once the values Secret is in place.
	secretName string
}

// Reconcile brings one token in line with its spec: its ServiceAccount and
// RBAC, then its values Secret; the status, computed from what the phases
// did, is patched once at the end when it changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	token := &fleet.ClusterRegistrationToken{}
	if err := r.Client.Get(ctx, req.NamespacedName, token); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !token.DeletionTimestamp.IsZero() {
		return outcome.Result(r.reconcileDelete(ctx, token), 0)
	}
	s := &scope{token: token, expires: registration.TokenExpiry(token)}
	if s.expires != nil && !r.Now().Before(s.expires.Time) {
		ctrl.LoggerFrom(ctx).Info("Deleting expired registration token", "token", klog.KObj(token), "expired", s.expires.Time)
		return outcome.Result(client.IgnoreNotFound(r.Client.Delete(ctx, token)), 0)
	}
	if controllerutil.AddFinalizer(token, fleet.RegistrationTokenFinalizer) {
		if err := r.Client.Update(ctx, token); err != nil {
			return ctrl.Result{}, err
		}
	}

	before := token.DeepCopy()
	var err error
	defer func() {
		// Most reconciles (an owned Secret touched, a resync) change
		// nothing, and write nothing.
		token.Status = withIssued(status(before.Status, s.secretName, s.expires), token.Generation, err, r.Now())
		in := outcome.Input{Object: token, Err: err}
		if s.expires != nil {
			// Come back when it expires, to delete it, even when it cannot
			// be issued.
			in.Poll = s.expires.Sub(r.Now()) + 10*time.Millisecond
		}
		res, retErr = outcome.Finish(ctx, r.Client, before, in)
	}()
	for _, phase := range []func(context.Context, *scope) error{
		r.reconcileServiceAccount,
		r.reconcileSecret,
	} {
		if err = phase(ctx, s); err != nil {
			break
		}
	}
	return res, retErr
}
