package bundle

import (
	"context"
	"maps"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/target"
)

type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// retargetOn is the event handler of the watches whose events change what
// targeting reads (Clusters, ClusterGroups, BundleNamespaceMappings): it
// enqueues the bundles fn maps an event to, each marked for a full pass, and
// calls onDelete (when set) with a deleted object. It is an event handler
// and not a MapFunc because it changes the controller's memory: the mark
// must be set before the request is queued, or the reconcile it starts
// could take the cheaper status pass on targets that are out of date. fn
// itself only maps.
func (r *Reconciler) retargetOn(fn handler.MapFunc, onDelete func(types.UID)) handler.EventHandler {
	add := func(ctx context.Context, o client.Object, q queue) {
		for _, req := range fn(ctx, o) {
			r.mem.markRetarget(req.NamespacedName)
			q.Add(req)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) { add(ctx, e.Object, q) },
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
			add(ctx, e.ObjectOld, q)
			add(ctx, e.ObjectNew, q)
		},
		DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q queue) {
			if onDelete != nil {
				onDelete(e.Object.GetUID())
			}
			add(ctx, e.Object, q)
		},
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q queue) { add(ctx, e.Object, q) },
	}
}

// deploymentEvents enqueues a BundleDeployment's bundle after statusDelay. A
// change of its spec or labels by someone else marks the bundle for a full
// pass, which is why this is an event handler and not a MapFunc; the
// version a pass patched itself does not (memory.ownWrite), and a new or
// deleted deployment is caught by the status pass itself.
func (r *Reconciler) deploymentEvents() handler.EventHandler {
	add := func(o client.Object, q queue, full bool) {
		key, ok := bundleOf(o)
		if !ok {
			return
		}
		if full {
			r.mem.markRetarget(key)
		}
		q.AddAfter(reconcile.Request{NamespacedName: key}, statusDelay)
	}
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q queue) { add(e.Object, q, false) },
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q queue) {
			own := r.mem.ownWrite(e.ObjectNew) // asked of every version: a later one ends the record
			full := !own && (e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() ||
				!maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()))
			add(e.ObjectOld, q, full)
			add(e.ObjectNew, q, full)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q queue) {
			r.mem.deleted(client.ObjectKeyFromObject(e.Object))
			add(e.Object, q, false)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q queue) { add(e.Object, q, true) },
	}
}

// bundlesForCluster maps a Cluster to the bundles that target it now or
// have a BundleDeployment for it from before. It reads the controller's
// memory (compiled bundles and groups) but never writes it. A bundle whose
// compiled targets are missing or stale is mapped anyway: matching is its
// reconcile's job.
func (r *Reconciler) bundlesForCluster(ctx context.Context, o client.Object) []reconcile.Request {
	cluster, ok := o.(*fleet.Cluster)
	if !ok {
		return nil
	}
	log := ctrl.LoggerFrom(ctx).WithValues("cluster", klog.KObj(cluster))
	seen := map[types.NamespacedName]bool{}
	bds := &fleet.BundleDeploymentList{}
	if err := r.Client.List(ctx, bds, client.InNamespace(names.ClusterNamespaceFor(cluster.Namespace, cluster.Name, cluster.Status.Namespace)), client.UnsafeDisableDeepCopy); err != nil {
		log.Error(err, "Listing the cluster's BundleDeployments failed: bundles that targeted it before may not be reconciled")
	}
	for _, bd := range bds.Items {
		if key, ok := bundleOf(&bd); ok {
			seen[key] = true
		}
	}
	groups, err := r.compiledGroups(ctx, cluster.Namespace, false)
	if err != nil {
		log.Error(err, "Listing the cluster's ClusterGroups failed: bundles that target it through a group may not be reconciled")
	}
	info := target.ClusterInfoFor(cluster, groups)
	bundles := &fleet.BundleList{}
	if err := r.Client.List(ctx, bundles, client.UnsafeDisableDeepCopy); err != nil {
		log.Error(err, "Listing Bundles failed: bundles that target the cluster now may not be reconciled")
	}
	// Bundles in other namespaces reach this cluster only through mappings;
	// those are rare, so they are looked at only where a mapping exists.
	mapped := map[string]bool{cluster.Namespace: true}
	for i := range bundles.Items {
		b := &bundles.Items[i]
		key := types.NamespacedName{Namespace: b.Namespace, Name: b.Name}
		if seen[key] {
			continue
		}
		has, known := mapped[b.Namespace]
		if !known {
			has = r.hasMappings(ctx, b.Namespace)
			mapped[b.Namespace] = has
		}
		if !has {
			continue
		}
		c, ok := r.mem.compiledBundle(b)
		if !ok {
			seen[key] = true
			continue
		}
		if _, match := c.Match(info); match {
			seen[key] = true
		}
	}
	reqs := make([]reconcile.Request, 0, len(seen))
	for k := range seen {
		reqs = append(reqs, reconcile.Request{NamespacedName: k})
	}
	return reqs
}

// hasMappings tells whether namespace ns holds a BundleNamespaceMapping. A
// failed List counts as one, so that no bundle is left out.
func (r *Reconciler) hasMappings(ctx context.Context, ns string) bool {
	list := &fleet.BundleNamespaceMappingList{}
	if err := r.Client.List(ctx, list, client.InNamespace(ns), client.Limit(1)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing BundleNamespaceMappings failed", "namespace", ns)
		return true
	}
	return len(list.Items) > 0
}

// bundlesInNamespace maps an object to every bundle of its namespace.
func (r *Reconciler) bundlesInNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	bundles := &fleet.BundleList{}
	if err := r.Client.List(ctx, bundles, client.InNamespace(o.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing Bundles failed: they may not be reconciled for this change",
			"object", klog.KObj(o), "kind", o.GetObjectKind().GroupVersionKind().Kind)
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(bundles.Items))
	for _, b := range bundles.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: b.Namespace, Name: b.Name}})
	}
	return reqs
}

// windowChanged passes the updates of a Cluster whose deployment window
// opened or closed (status.scheduled, status.activeSchedule): its
// BundleDeployments' spec.offSchedule follows.
var windowChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*fleet.Cluster)
		n, ok2 := e.ObjectNew.(*fleet.Cluster)
		return ok1 && ok2 && target.OffSchedule(o) != target.OffSchedule(n)
	},
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
}
