package notification

import (
	"context"
	"maps"
	"sync"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	notification "github.com/gitfleet/fleet/api/notification/v1alpha1"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/egress"
	"github.com/gitfleet/fleet/internal/notify"
)

// Defaults of the Reconciler.
const (
	// DefaultStallDeadline is a rollout's deadline when the Notification
	// gives none.
	DefaultStallDeadline = 30 * time.Minute
	// DefaultDestinationRate is how many messages one Notification sends
	// per minute at most, after a burst of DefaultDestinationBurst.
	DefaultDestinationRate  = 20
	DefaultDestinationBurst = 10
	// DefaultWorkers is the number of Notifications served at once: a slow
	// destination holds one for at most a few requests' timeouts.
	DefaultWorkers = 4
)

// Reconciler tells each Notification's destination about the rollouts of
// the GitRepos and HelmOps it selects.
type Reconciler struct {
	Client client.Client
	// APIReader reads Notifications fresh before anything is sent, and the
	// destinations' Secrets; default mgr.GetAPIReader().
	APIReader client.Reader
	// Egress is where destinations may be; the zero value refuses egress's
	// defaults (loopback, link-local, ...).
	Egress egress.Policy
	// Sender delivers the messages; default one dialing through Egress.
	Sender *notify.Client
	// Workers is the number of Notifications reconciled at once; default
	// DefaultWorkers.
	Workers int
	// DestinationRate and DestinationBurst bound the messages of one
	// Notification (per minute, and at once); defaults
	// DefaultDestinationRate and DefaultDestinationBurst.
	DestinationRate  int
	DestinationBurst int
	// Now is the clock (tests may replace it).
	Now func() time.Time

	limitersMu sync.Mutex
	limiters   map[types.NamespacedName]*rate.Limiter
}

// SetupWithManager registers the controller: it watches Notifications and
// the GitRepos, HelmOps and Bundles of their namespaces, mapped to the
// Notifications that select them.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Sender == nil {
		r.Sender = notify.NewClient(egress.NewDialer(r.Egress))
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.Workers <= 0 {
		r.Workers = DefaultWorkers
	}
	if r.DestinationRate <= 0 {
		r.DestinationRate = DefaultDestinationRate
	}
	if r.DestinationBurst <= 0 {
		r.DestinationBurst = DefaultDestinationBurst
	}
	r.limiters = map[types.NamespacedName]*rate.Limiter{}
	return ctrl.NewControllerManagedBy(mgr).
		For(&notification.Notification{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&fleet.GitRepo{}, handler.EnqueueRequestsFromMapFunc(r.forSource(notification.KindGitRepo)), builder.WithPredicates(sourceChanged)).
		Watches(&fleet.HelmOp{}, handler.EnqueueRequestsFromMapFunc(r.forSource(notification.KindHelmOp)), builder.WithPredicates(sourceChanged)).
		Watches(&fleet.Bundle{}, handler.EnqueueRequestsFromMapFunc(r.forBundle)).
		Named("notification").
		WithOptions(controller.Options{MaxConcurrentReconciles: r.Workers}).
		Complete(r)
}

// sourceChanged lets through the GitRepo and HelmOp changes a rollout
// depends on: a new revision (in status, which does not bump the
// generation), labels (the selectors), creation and deletion.
var sourceChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return revisionOf(e.ObjectOld) != revisionOf(e.ObjectNew) || !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
	},
}

func revisionOf(o client.Object) string {
	switch s := o.(type) {
	case *fleet.GitRepo:
		return s.Status.Commit
	case *fleet.HelmOp:
		return s.Status.Version
	}
	return ""
}

// forSource maps a GitRepo or HelmOp to the Notifications of its namespace
// that select it.
func (r *Reconciler) forSource(kind notification.SourceKind) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []ctrl.Request {
		return r.selecting(ctx, kind, o.GetNamespace(), o.GetLabels())
	}
}

// forBundle maps a Bundle to the Notifications that select its GitRepo or
// HelmOp, read from the cache.
func (r *Reconciler) forBundle(ctx context.Context, o client.Object) []ctrl.Request {
	l := o.GetLabels()
	key := client.ObjectKey{Namespace: o.GetNamespace()}
	var src client.Object
	var kind notification.SourceKind
	switch {
	case l[fleet.RepoLabel] != "":
		key.Name, src, kind = l[fleet.RepoLabel], &fleet.GitRepo{}, notification.KindGitRepo
	case l[fleet.HelmOpLabel] != "":
		key.Name, src, kind = l[fleet.HelmOpLabel], &fleet.HelmOp{}, notification.KindHelmOp
	default:
		return nil
	}
	if err := r.Client.Get(ctx, key, src); err != nil {
		// Gone, or not cached yet: its own event brings the Notifications.
		return nil
	}
	return r.selecting(ctx, kind, src.GetNamespace(), src.GetLabels())
}

// selecting lists the Notifications of ns that follow kind and whose
// selector matches labels (a selector that does not parse matches nothing:
// its Notification reports it).
func (r *Reconciler) selecting(ctx context.Context, kind notification.SourceKind, ns string, labels map[string]string) []ctrl.Request {
	list := &notification.NotificationList{}
	if err := r.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the Notifications of a namespace failed: its rollouts are told about at their next change", "namespace", ns)
		return nil
	}
	var out []ctrl.Request
	for i := range list.Items {
		n := &list.Items[i]
		if sel, err := selectorOf(n); err == nil && follows(n, kind) && sel.Matches(labelSet(labels)) {
			out = append(out, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(n)})
		}
	}
	return out
}

// limiter is the rate limiter of one Notification's destination.
func (r *Reconciler) limiter(key types.NamespacedName) *rate.Limiter {
	r.limitersMu.Lock()
	defer r.limitersMu.Unlock()
	l, ok := r.limiters[key]
	if !ok {
		l = rate.NewLimiter(rate.Limit(float64(r.DestinationRate)/60), r.DestinationBurst)
		r.limiters[key] = l
	}
	return l
}

func (r *Reconciler) forget(key types.NamespacedName) {
	r.limitersMu.Lock()
	defer r.limitersMu.Unlock()
	delete(r.limiters, key)
}
