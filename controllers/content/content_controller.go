package content

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/cacheindex"
	"github.com/gitfleet/fleet/internal/enqueue"
	"github.com/gitfleet/fleet/internal/outcome"
)

// countDelay is how long a change of a Content's references waits before it
// is counted: the changes in between are counted with it. A count that
// moved is looked at again after as long, and written once it stayed the
// same in between (countDue).
const countDelay = 5 * time.Second

// DefaultCountHold is how long at most a Content's reference count that
// keeps moving is held back before it is written anyway.
const DefaultCountHold = time.Minute

// Reconciler garbage-collects Contents by reference count.
type Reconciler struct {
	Client client.Client
	// Grace is how long an unreferenced Content is kept (a bundle may be
	// about to create deployments for it). Default one minute.
	Grace time.Duration
	// Workers is the number of Contents reconciled at once.
	Workers int
	// APIReader reads around the cache: before a Content is deleted, the API
	// server itself is asked whether a deployment references it, since the
	// cache may not have seen a new one yet. Default mgr.GetAPIReader().
	APIReader client.Reader
	// CountHold is how long at most a reference count that keeps moving is
	// held back (default DefaultCountHold).
	CountHold time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time

	// refs is the cache's index of BundleDeployments by Content.
	refs toolscache.Indexer
	// held is the count change held back for each Content (its name to a
	// *held).
	held sync.Map
}

// SetupWithManager registers the controller and its index.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.Grace == 0 {
		r.Grace = time.Minute
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.CountHold == 0 {
		r.CountHold = DefaultCountHold
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
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
		// Its own status writes do not wake a Content: while its count
		// moves, each would be counted and written again at once.
		For(&fleet.Content{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{},
			predicate.LabelChangedPredicate{}, predicate.AnnotationChangedPredicate{}))).
		// Only what moves a reference: a deployment created, deleted or
		// pointed at another Content. Its agent's status writes (one per
		// deployment during a fan-out) do not; and while a fan-out creates
		// thousands, each Content's count is written once per countDelay.
		Watches(&fleet.BundleDeployment{}, enqueue.After(countDelay, func(_ context.Context, o client.Object) []reconcile.Request {
			if c := o.GetLabels()[fleet.ContentNameLabel]; c != "" {
				return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: c}}}
			}
			return nil
		}), builder.WithPredicates(predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
			return e.ObjectOld.GetLabels()[fleet.ContentNameLabel] != e.ObjectNew.GetLabels()[fleet.ContentNameLabel] ||
				e.ObjectOld.GetDeletionTimestamp().IsZero() != e.ObjectNew.GetDeletionTimestamp().IsZero()
		}})).
		Named("content").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Complete(r)
}

// scope is what one reconcile's phases share.
type scope struct {
	content *fleet.Content
	// refs counts the BundleDeployments that reference the Content.
	refs int
	// deleted: the Content was deleted, there is no status to write.
	deleted bool
}

// Reconcile counts a Content's references, deletes it once it has had none
// for the grace period, and writes the count once at the end.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, reterr error) {
	content := &fleet.Content{}
	if err := r.Client.Get(ctx, req.NamespacedName, content); err != nil {
		if apierrors.IsNotFound(err) {
			r.held.Delete(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s := &scope{content: content}
	before := content.DeepCopy()
	defer func() {
		if s.deleted {
			r.held.Delete(req.Name)
		}
		due := reterr == nil && !s.deleted && r.countDue(s, &result)
		in := outcome.Input{Object: content, Err: reterr, After: result.RequeueAfter}
		if !due {
			// Nothing new to say, nobody to say it to, or not yet.
			result, reterr = outcome.Compute(ctx, in)
			return
		}
		computeStatus(content, s.refs)
		result, reterr = outcome.Finish(ctx, r.Client, before, in)
		if reterr == nil {
			r.held.Delete(req.Name)
		}
	}()
	if err := r.countReferences(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	return r.collect(ctx, s)
}

// countDue tells whether the count is written now (countDue); if not, and
// it moved, the change is held back and looked at again after countDelay.
func (r *Reconciler) countDue(s *scope, result *ctrl.Result) bool {
	name := s.content.Name
	var prev *held
	if v, ok := r.held.Load(name); ok {
		prev = v.(*held)
	}
	now := r.Now()
	if countDue(s.content.Status.ReferenceCount, s.refs, prev, r.CountHold, now) {
		return true
	}
	if s.refs == s.content.Status.ReferenceCount {
		r.held.Delete(name)
		return false
	}
	since := now
	if prev != nil {
		since = prev.since
	}
	r.held.Store(name, &held{refs: s.refs, since: since})
	if result.RequeueAfter == 0 || countDelay < result.RequeueAfter {
		result.RequeueAfter = countDelay
	}
	return false
}

// countReferences counts the BundleDeployments that reference the Content,
// from the cache's index.
func (r *Reconciler) countReferences(_ context.Context, s *scope) error {
	keys, err := r.refs.IndexKeys(fleet.ContentIndex, s.content.Name)
	if err != nil {
		return fmt.Errorf("counting the references to content %s: %w", s.content.Name, err)
	}
	s.refs = len(keys)
	return nil
}

// collect deletes the Content when nothing has referenced it for the grace
// period, or says when to look again.
func (r *Reconciler) collect(ctx context.Context, s *scope) (ctrl.Result, error) {
	wait, unused := untilCollected(s.content.CreationTimestamp.Time, s.refs, r.Grace, r.Now())
	switch {
	case !unused:
		return ctrl.Result{}, nil
	case wait > 0:
		return ctrl.Result{RequeueAfter: wait}, nil
	}
	// The cache counted none; a deployment too new for it may exist. Deletes
	// are rare, so the API server is asked once, for at most one deployment.
	live := &fleet.BundleDeploymentList{}
	if err := r.APIReader.List(ctx, live, client.MatchingLabels{fleet.ContentNameLabel: s.content.Name}, client.Limit(1)); err != nil {
		return ctrl.Result{}, fmt.Errorf("checking the references to content %s: %w", s.content.Name, err)
	}
	if len(live.Items) > 0 {
		return ctrl.Result{RequeueAfter: r.Grace}, nil
	}
	ctrl.LoggerFrom(ctx).V(1).Info("Deleting unreferenced content", "content", klog.KObj(s.content))
	// The precondition keeps a Content that changed since it was read (a
	// bundle re-created it) from being deleted on stale grounds.
	err := r.Client.Delete(ctx, s.content, client.Preconditions{ResourceVersion: &s.content.ResourceVersion})
	if err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s.deleted = true
	return ctrl.Result{}, nil
}
