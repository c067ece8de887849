package content

import (
	"context"
	"time"

	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/cacheindex"
	"github.com/gitfleet/fleet/internal/enqueue"
)

// Reconciler garbage-collects Contents by reference count.
type Reconciler struct {
	Client client.Client
	// Grace is how long an unreferenced Content is kept (a bundle may be
	// about to create deployments for it). Default one minute.
	Grace   time.Duration
	Workers int
	Now     func() time.Time

	// refs is the cache's index of BundleDeployments by Content.
	refs toolscache.Indexer
}

// SetupWithManager registers the controller and its index.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Grace == 0 {
		r.Grace = time.Minute
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	// References are counted from the cache's index itself, by key: a
	// Content deployed to thousands of clusters is counted again and again
	// while their deployments change, and listing them would copy every one
	// each time.
	refs, err := cacheindex.For(ctx, mgr.GetCache(), &fleet.BundleDeployment{}, toolscache.Indexers{fleet.ContentIndex: func(obj any) ([]string, error) {
		if o, ok := obj.(client.Object); ok {
			if c := o.GetLabels()[fleet.ContentNameLabel]; c != "" {
				return []string{c}, nil
			}
		}
		return nil, nil
	}})
	if err != nil {
		return err
	}
	r.refs = refs
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleet.Content{}).
		Watches(&fleet.BundleDeployment{}, enqueue.After(2*time.Second, func(_ context.Context, o client.Object) []reconcile.Request {
			if c := o.GetLabels()[fleet.ContentNameLabel]; c != "" {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: c}}}
			}
			return nil
		})).
		Named("content").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Complete(r)
}

// Reconcile counts a Content's references and deletes it when unused.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	content := &fleet.Content{}
	if err := r.Client.Get(ctx, req.NamespacedName, content); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	keys, err := r.refs.IndexKeys(fleet.ContentIndex, content.Name)
	if err != nil {
		return ctrl.Result{}, err
	}
	refs := len(keys)
	if refs != content.Status.ReferenceCount {
		before := content.DeepCopy()
		content.Status.ReferenceCount = refs
		if err := r.Client.Status().Patch(ctx, content, client.MergeFrom(before)); err != nil {
			return ctrl.Result{}, client.IgnoreNotFound(err)
		}
	}
	if refs > 0 {
		return ctrl.Result{}, nil
	}
	if left := content.CreationTimestamp.Add(r.Grace).Sub(r.Now()); left > 0 {
		return ctrl.Result{RequeueAfter: left}, nil
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Deleting unreferenced content", "content", content.Name)
	return ctrl.Result{}, client.IgnoreNotFound(r.Client.Delete(ctx, content, client.Preconditions{ResourceVersion: &content.ResourceVersion}))
}
