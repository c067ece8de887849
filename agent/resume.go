package agent

import (
	"context"
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	"github.com/gitfleet/fleet/agent/backoff"
)

// resumingInformer builds the agent's upstream informers on a ListerWatcher
// whose watch outlasts a network cut: client-go's reflector lists every
// object again when a watch cannot be restarted for any reason but a refused
// connection, so an edge cluster whose link drops (a timeout, a reset, a TLS
// handshake cut short) would download all its BundleDeployments on every
// reconnect. Here the watch is retried from the last resourceVersion until
// the manager's API server answers; only its answer (410 Gone when the cut
// outlasted the server's watch history, a refusal) sends the reflector back
// to a full list.
func resumingInformer(minBackoff, maxBackoff time.Duration) func(toolscache.ListerWatcher, runtime.Object, time.Duration, toolscache.Indexers) toolscache.SharedIndexInformer {
	return func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, indexers toolscache.Indexers) toolscache.SharedIndexInformer {
		r := &resumingListerWatcher{inner: toolscache.ToListerWatcherWithContext(lw), min: minBackoff, max: maxBackoff}
		return toolscache.NewSharedIndexInformer(r, obj, resync, indexers)
	}
}

type resumingListerWatcher struct {
	inner    toolscache.ListerWatcherWithContext
	min, max time.Duration
}

var _ toolscache.ListerWatcherWithContext = &resumingListerWatcher{}

func (r *resumingListerWatcher) List(options metav1.ListOptions) (runtime.Object, error) {
	return r.inner.ListWithContext(context.Background(), options)
}

func (r *resumingListerWatcher) ListWithContext(ctx context.Context, options metav1.ListOptions) (runtime.Object, error) {
	return r.inner.ListWithContext(ctx, options)
}

func (r *resumingListerWatcher) Watch(options metav1.ListOptions) (watch.Interface, error) {
	return r.WatchWithContext(context.Background(), options)
}

// WatchWithContext starts the watch, retrying with a capped backoff while
// the API server cannot be reached. A watch from no resourceVersion (the
// first one) gains nothing from waiting and is not retried.
func (r *resumingListerWatcher) WatchWithContext(ctx context.Context, options metav1.ListOptions) (watch.Interface, error) {
	b := backoff.New(r.min, r.max)
	for {
		w, err := r.inner.WatchWithContext(ctx, options)
		if err == nil || !unreachable(err) || ctx.Err() != nil || options.ResourceVersion == "" || options.ResourceVersion == "0" {
			return w, err
		}
		if !b.Wait(ctx, 0, "", nil) {
			return nil, err
		}
	}
}

// unreachable tells a failure to reach the API server (no answer from it)
// from an answer it gave.
func unreachable(err error) bool {
	var status apierrors.APIStatus
	return !errors.As(err, &status)
}
