// Package enqueue has event handlers that coalesce bursts. When a thousand
// BundleDeployments change within a second, the Bundle, Cluster and Content
// that summarize them should be recomputed (and their status written) a few
// times, not a thousand times: each request is added after a delay, and the
// work queue keeps a single pending entry per object until it is due. Its
// predicates (IgnoreHeartbeats) drop the events that should cost nothing.
package enqueue

import (
	"context"
	"time"

	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// After maps every event of an object through fn and enqueues the requests
// after delay.
func After(delay time.Duration, fn handler.MapFunc) handler.EventHandler {
	type queue = workqueue.TypedRateLimitingInterface[reconcile.Request]
	add := func(ctx context.Context, obj client.Object, q queue) {
		for _, req := range fn(ctx, obj) {
			q.AddAfter(req, delay)
		}
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, e event.CreateEvent, q queue) { add(ctx, e.Object, q) },
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q queue) {
			add(ctx, e.ObjectOld, q)
			add(ctx, e.ObjectNew, q)
		},
		DeleteFunc:  func(ctx context.Context, e event.DeleteEvent, q queue) { add(ctx, e.Object, q) },
		GenericFunc: func(ctx context.Context, e event.GenericEvent, q queue) { add(ctx, e.Object, q) },
	}
}
