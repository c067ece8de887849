package bundle

import (
	"context"
	"maps"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// A full pass matches every cluster, works out every desired
// BundleDeployment and compares it with what exists. Most events during a
// rollout are agents reporting status, which change none of that. For them a
// status pass reuses the targets of the last full pass, recounts, and replans
// the rollout; only when the plan then wants a write does the full pass run.
// At 5000 clusters this was most of the manager's allocations.

// fullPassEvery bounds how long a status pass may trust the last full pass.
const fullPassEvery = 2 * time.Minute

// statusDelay coalesces the status changes of many deployments into one pass.
const statusDelay = 250 * time.Millisecond

// pass is what a status pass reuses of the last full pass of a bundle.
type pass struct {
	generation  int64
	labels      map[string]string
	contentName string
	targets     []clusterTarget // without cluster and options
	at          time.Time
}

// remember keeps what a successful full pass found, for the status passes
// after it.
func (r *Reconciler) remember(s *scope, now time.Time) {
	if len(s.errs) > 0 || s.plan == nil {
		r.passes.Delete(s.bundle.UID)
		return
	}
	targets := make([]clusterTarget, len(s.targets))
	for i, t := range s.targets {
		targets[i] = clusterTarget{info: t.info, namespace: t.namespace, id: t.id}
	}
	r.passes.Store(s.bundle.UID, &pass{
		generation: s.bundle.Generation, labels: maps.Clone(s.bundle.Labels),
		contentName: s.contentName, targets: targets, at: now,
	})
}

// statusPass recounts the bundle's deployments against the last full pass's
// targets. It returns false, with s as it found it, when a full pass is due:
// nothing trusted is remembered, or the plan wants a write.
func (r *Reconciler) statusPass(ctx context.Context, s *scope, now time.Time) (bool, error) {
	v, ok := r.passes.Load(s.bundle.UID)
	if !ok {
		return false, nil
	}
	p := v.(*pass)
	if p.generation != s.bundle.Generation || !maps.Equal(p.labels, s.bundle.Labels) || now.Sub(p.at) > fullPassEvery {
		return false, nil
	}
	s.contentName, s.targets = p.contentName, p.targets
	if err := r.listExisting(ctx, s); err != nil {
		return false, err
	}
	if err := r.planRollout(s); err != nil || needsWrites(s.targets, s.existing, s.plan) {
		s.contentName, s.targets, s.existing, s.plan = "", nil, nil, nil
		return false, nil
	}
	return true, nil
}

// needsWrites tells whether a pass with these targets, existing deployments
// (by cluster namespace) and plan would create, update or delete anything.
func needsWrites(targets []clusterTarget, existing map[string]*fleet.BundleDeployment, plan *Plan) bool {
	found := 0
	for i, t := range targets {
		bd := existing[t.namespace]
		switch {
		case bd == nil:
			if plan.Create[i] {
				return true
			}
			continue
		case bd.Spec.StagedDeploymentID != t.id, plan.Deploy[i] && bd.Spec.DeploymentID != t.id:
			return true
		}
		found++
	}
	// A deployment for a cluster that is no longer targeted must go.
	return found != len(existing)
}

// retargeting marks the bundles fn maps an event to as needing a full pass.
func (r *Reconciler) retargeting(fn handler.MapFunc) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		reqs := fn(ctx, o)
		for _, req := range reqs {
			r.retarget.Store(req.NamespacedName, struct{}{})
		}
		return reqs
	}
}

// deploymentEvents enqueues a BundleDeployment's bundle after statusDelay. A
// change of its spec or labels (by someone else) asks for a full pass; a new
// or deleted deployment is caught by the status pass itself.
func (r *Reconciler) deploymentEvents() handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	add := func(o client.Object, q queue, full bool) {
		key, ok := bundleOf(o)
		if !ok {
			return
		}
		if full {
			r.retarget.Store(key, struct{}{})
		}
		q.AddAfter(reconcile.Request{NamespacedName: key}, statusDelay)
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q queue) { add(e.Object, q, false) },
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q queue) {
			full := e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
				!maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
			add(e.ObjectOld, q, full)
			add(e.ObjectNew, q, full)
		},
		DeleteFunc:  func(_ context.Context, e event.DeleteEvent, q queue) { add(e.Object, q, false) },
		GenericFunc: func(_ context.Context, e event.GenericEvent, q queue) { add(e.Object, q, true) },
	}
}
