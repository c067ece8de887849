package notification

import (
	"context"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	notification "github.com/gitfleet/fleet/api/notification/v1alpha1"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/egress"
	"github.com/gitfleet/fleet/internal/notify"
	"github.com/gitfleet/fleet/internal/secretmeta"
	"github.com/gitfleet/fleet/internal/sourcepoll"
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
	// Secrets is the metadata watch of Secrets; default a new one added
	// to the manager.
	Secrets *secretmeta.Watch
	// Now is the clock (tests may replace it).
	Now func() time.Time

	// index maps events to Notifications.
	index *index

	limitersMu sync.Mutex
	limiters   map[types.NamespacedName]*rate.Limiter
}

// SetupWithManager registers the controller: it watches Notifications, the
// GitRepos, HelmOps and Bundles of their namespaces (mapped to the
// Notifications that select them, through an index of the Notifications
// fed by their informer), and the metadata of the Secrets they name.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
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
	if r.Secrets == nil {
		var err error
		if r.Secrets, err = secretmeta.ForManager(mgr); err != nil {
			return err
		}
	}
	r.limiters = map[types.NamespacedName]*rate.Limiter{}
	r.index = newIndex()
	if err := r.index.feed(ctx, mgr.GetCache()); err != nil {
		return fmt.Errorf("indexing the Notifications: %w", err)
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&notification.Notification{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&fleet.GitRepo{}, handler.EnqueueRequestsFromMapFunc(r.forSource(notification.KindGitRepo)), builder.WithPredicates(sourceChanged)).
		Watches(&fleet.HelmOp{}, handler.EnqueueRequestsFromMapFunc(r.forSource(notification.KindHelmOp)), builder.WithPredicates(sourceChanged)).
		Watches(&fleet.Bundle{}, handler.EnqueueRequestsFromMapFunc(r.forBundle), builder.WithPredicates(BundleChanged)).
		// A Secret created, fixed or removed takes effect at once, not at
		// the next retry: its metadata is watched (the one metadata watch
		// of the manager), its data read uncached when sending.
		WatchesRawSource(r.Secrets.Source(handler.TypedEnqueueRequestsFromMapFunc(r.forSecret))).
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

// BundleChanged lets through the Bundle changes that can change what is
// due about a rollout (see bundleView): creation, deletion, and an update
// that changes the Bundle's view. The counts of a rollout in progress
// change with every cluster that gets ready; they are read when a message
// is sent, and do not wake the controller by themselves.
var BundleChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*fleet.Bundle)
		n, ok2 := e.ObjectNew.(*fleet.Bundle)
		if !ok1 || !ok2 {
			return true
		}
		return bundleView(o) != bundleView(n)
	},
}

// view is what of one Bundle decides which events of its rollout are due
// (observe, dueEvents): whose it is, whether its status is for the
// revision, whether it failed, whether it is done, and which of its
// partitions are reached.
type view struct {
	repo, helmOp, commit, version string
	current                       bool
	errApplied, broken, ready     bool
	partitions                    string
}

func bundleView(b *fleet.Bundle) view {
	s := b.Status.Summary
	v := view{repo: b.Labels[fleet.RepoLabel], helmOp: b.Labels[fleet.HelmOpLabel], commit: b.Labels[fleet.CommitLabel],
		current: b.Status.ObservedGeneration == b.Generation, errApplied: s.ErrApplied > 0,
		ready: s.Ready >= s.DesiredReady && s.NotReady+s.WaitApplied+s.ErrApplied+s.OutOfSync+s.Modified+s.Pending == 0}
	if b.Spec.Helm != nil {
		v.version = b.Spec.Helm.Version
	}
	_, v.broken = sourcepoll.BundleError(b)
	var sb strings.Builder
	for _, p := range partitions([]fleet.Bundle{*b}) {
		sb.WriteString(p.name)
		if p.reached {
			sb.WriteString("=1,")
		} else {
			sb.WriteString("=0,")
		}
	}
	v.partitions = sb.String()
	return v
}

// forSource maps a GitRepo or HelmOp to the Notifications of its namespace
// that select it.
func (r *Reconciler) forSource(kind notification.SourceKind) handler.MapFunc {
	return func(_ context.Context, o client.Object) []ctrl.Request {
		return r.index.selecting(kind, o.GetNamespace(), labels.Set(o.GetLabels()))
	}
}

// forBundle maps a Bundle to the Notifications that select its GitRepo or
// HelmOp. The source is read from the cache only when a Notification of
// the namespace follows its kind with a selector that needs its labels.
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
	some, needLabels := r.index.follows(kind, key.Namespace)
	if !some {
		return nil
	}
	var srcLabels labels.Set
	if needLabels {
		if err := r.Client.Get(ctx, key, src); err != nil {
			// Gone, or not cached yet: its own event brings the Notifications.
			return nil
		}
		srcLabels = labels.Set(src.GetLabels())
	}
	return r.index.selecting(kind, key.Namespace, srcLabels)
}

// forSecret maps a Secret to the Notifications of its namespace that name
// it as their destination's Secret.
func (r *Reconciler) forSecret(_ context.Context, o *metav1.PartialObjectMetadata) []reconcile.Request {
	return r.index.usingSecret(o.Namespace, o.Name)
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
