package downstreamresource

import (
	"context"
	"fmt"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/secretmeta"
)

// SourceIndex indexes BundleDeployments by the sources their
// downstreamResources name, as SourceKey writes them.
const SourceIndex = "downstreamresource.source"

// hasSourcesIndex indexes BundleDeployments that name any source, or carry
// a seal, by their namespace: a new agent key seals again only those.
const hasSourcesIndex = "downstreamresource.namespace"

// SourceKey is the index key of a source: "namespace/Kind/name".
func SourceKey(namespace, kind, name string) string {
	return namespace + "/" + kind + "/" + name
}

// Reconciler seals the downstreamResources of BundleDeployments (see the
// package doc).
type Reconciler struct {
	// Client reads BundleDeployments and check-in Leases from the cache and
	// patches spec.sealedResources.
	Client client.Client
	// APIReader reads the sources' values, uncached.
	APIReader client.Reader
	// Secrets is the manager's metadata watch of Secrets.
	Secrets *secretmeta.Watch
	// Workers is how many BundleDeployments are sealed at once (default 1).
	Workers int
}

// SetupWithManager registers the indexes and the controller: it hears of a
// BundleDeployment's spec, of its sources' metadata and of its agent's
// check-in Lease.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	idx := mgr.GetFieldIndexer()
	if err := idx.IndexField(ctx, &fleet.BundleDeployment{}, SourceIndex, sourceKeys); err != nil {
		return err
	}
	if err := idx.IndexField(ctx, &fleet.BundleDeployment{}, hasSourcesIndex, func(o client.Object) []string {
		bd := o.(*fleet.BundleDeployment)
		if len(bd.Spec.Options.DownstreamResources) == 0 && bd.Spec.SealedResources == nil {
			return nil
		}
		return []string{bd.Namespace}
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named("downstreamresource").
		For(&fleet.BundleDeployment{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WatchesRawSource(r.Secrets.Source(handler.TypedEnqueueRequestsFromMapFunc(func(ctx context.Context, o *metav1.PartialObjectMetadata) []reconcile.Request {
			return r.users(ctx, SourceKey(o.Namespace, "Secret", o.Name))
		}))).
		WatchesMetadata(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, o client.Object) []reconcile.Request {
			return r.users(ctx, SourceKey(o.GetNamespace(), "ConfigMap", o.GetName()))
		})).
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(r.ofLease),
			builder.WithPredicates(predicate.AnnotationChangedPredicate{})).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Complete(r)
}

// sourceKeys are the index keys of a BundleDeployment's sources.
func sourceKeys(o client.Object) []string {
	bd := o.(*fleet.BundleDeployment)
	ns := bd.Labels[fleet.BundleNamespaceLabel]
	if ns == "" {
		return nil
	}
	keys := make([]string, 0, len(bd.Spec.Options.DownstreamResources))
	for _, d := range bd.Spec.Options.DownstreamResources {
		keys = append(keys, SourceKey(ns, d.Kind, d.Name))
	}
	return keys
}

// users are the BundleDeployments naming the source key.
func (r *Reconciler) users(ctx context.Context, key string) []reconcile.Request {
	list := &fleet.BundleDeploymentList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{SourceIndex: key}); err != nil {
		// The cache's index cannot fail for a registered index.
		ctrl.LoggerFrom(ctx).Error(err, "Listing the BundleDeployments of a downstream resource", "source", key)
		return nil
	}
	return requests(list)
}

// ofLease are the BundleDeployments with downstreamResources in the
// Lease's cluster namespace.
func (r *Reconciler) ofLease(ctx context.Context, o client.Object) []reconcile.Request {
	if o.GetName() != fleet.AgentLeaseName {
		return nil
	}
	list := &fleet.BundleDeploymentList{}
	if err := r.Client.List(ctx, list, client.MatchingFields{hasSourcesIndex: o.GetNamespace()}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the BundleDeployments of a cluster namespace", "namespace", o.GetNamespace())
		return nil
	}
	return requests(list)
}

func requests(list *fleet.BundleDeploymentList) []reconcile.Request {
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// Reconcile seals one BundleDeployment's downstreamResources when they, or
// its agent's key, changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	return outcome.Compute(ctx, outcome.Input{Err: r.reconcile(ctx, req.NamespacedName)})
}

func (r *Reconciler) reconcile(ctx context.Context, key types.NamespacedName) error {
	bd := &fleet.BundleDeployment{}
	if err := r.Client.Get(ctx, key, bd); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !bd.DeletionTimestamp.IsZero() {
		return nil
	}
	w, err := r.desired(ctx, bd)
	if err != nil {
		return err
	}
	if equalSeal(bd.Spec.SealedResources, w) {
		return nil
	}
	var sealed *fleet.SealedResources
	if w != nil {
		if sealed, err = r.seal(ctx, bd, w); err != nil {
			return err
		}
	}
	patched := bd.DeepCopy()
	patched.Spec.SealedResources = sealed
	if err := r.Client.Patch(ctx, patched, client.MergeFrom(bd)); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("writing the sealed downstreamResources of BundleDeployment %s: %w", key, err))
	}
	if sealed != nil {
		ctrl.LoggerFrom(ctx).Info("Sealed the downstreamResources to the agent's key", "bundleDeployment", klog.KObj(bd),
			"recipient", sealed.Recipient, "sealed", len(sealed.Sources), "missing", sealed.Missing)
	}
	return nil
}
