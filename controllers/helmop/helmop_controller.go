package helmop

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/cacheindex"
	"github.com/gitfleet/fleet/internal/egress"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/sharding"
	"github.com/gitfleet/fleet/internal/sourcepoll"
	"github.com/gitfleet/fleet/internal/summary"
)

// DefaultSyncTimeout bounds one resolution and write of a HelmOp's Bundle.
const DefaultSyncTimeout = 5 * time.Minute

// Reconciler turns each HelmOp into one Bundle: it resolves the chart
// version, polls for new ones, writes the Bundle, and rolls the Bundle's
// status up into the HelmOp's.
type Reconciler struct {
	Client client.Client
	// APIReader reads the helmSecretName Secrets and, on delete, the
	// Bundle, bypassing the cache; default mgr.GetAPIReader().
	APIReader client.Reader
	// Workers is the number of HelmOps reconciled at once, and so the
	// number of chart download slots; the HelmOps of one namespace hold at
	// most half of them (rounded up) at once, so one tenant's slow
	// repository cannot stall the others.
	Workers int
	// SyncTimeout bounds one resolution and write; default
	// DefaultSyncTimeout.
	SyncTimeout time.Duration
	// MaxDownloadBytes bounds one download from a repository; 0 means the
	// bundlereader default.
	MaxDownloadBytes int64
	// Egress is where chart repositories, registries and chart URLs may
	// be; the zero value refuses egress's defaults (loopback, link-local,
	// ...).
	Egress egress.Policy
	// dialer makes every connection for a HelmOp, under Egress.
	dialer *egress.Dialer
	// Now is the clock (tests may replace it).
	Now func() time.Time
	// Recorder, when set, gets an event each time Accepted or Polled fails
	// with a new reason or recovers; default
	// mgr.GetEventRecorder("fleet-helmop").
	Recorder events.EventRecorder
	// ChartsInBundle makes the manager download each HelmOp's chart and put
	// it in its Bundle (a Content in etcd), so that agents never reach
	// chart repositories: for clusters that can reach only the manager.
	// By default, as in Fleet, the Bundle carries no chart but
	// helmOpOptions, and each agent downloads the chart itself with a copy
	// of helmSecretName in its cluster namespace.
	ChartsInBundle bool
	// Shard is the shard this manager serves: it handles only the HelmOps
	// labelled fleet.cattle.io/shard-ref with it, or, when empty, those
	// without the label (internal/sharding), and labels their Bundles alike.
	Shard string

	// deployments is the cache's index of BundleDeployments, with
	// fleet.HelmOpIndex: status.resources is computed from them.
	deployments toolscache.Indexer

	// ops is what the last resolution of each HelmOp found.
	ops sourcepoll.States[opState]
	// slots are the chart download slots, shared fairly among namespaces.
	slots sourcepoll.Slots
}

// IndexKey is the fleet.HelmOpIndex value of a BundleDeployment: "" when
// its Bundle was not made from a HelmOp.
func IndexKey(bd client.Object) string {
	return sourcepoll.DeploymentKey(bd, fleet.HelmOpLabel)
}

// SetupWithManager registers the controller: it watches HelmOps, their
// Bundles (for the status rollup), those Bundles' BundleDeployments
// (coalesced, as they change in bursts) for status.resources, and the
// GitRepoRestrictions of their namespaces.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	var err error
	r.deployments, err = sourcepoll.IndexDeployments(mgr, fleet.HelmOpIndex, fleet.HelmOpLabel)
	if err != nil {
		return err
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	r.dialer = egress.NewDialer(r.Egress)
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("fleet-helmop")
	}
	b := ctrl.NewControllerManagedBy(mgr).For(&fleet.HelmOp{}, builder.WithPredicates(sharding.Predicate(r.Shard), predicate.Or(helmOpChanged, sharding.RefChanged())))
	return sourcepoll.Watches(b, r.Client, fleet.HelmOpLabel, func() client.ObjectList { return &fleet.HelmOpList{} }).
		Named("helmop").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Complete(r)
}

// helmOpChanged lets through the HelmOp updates that matter: a spec change
// or a deletion. Status updates written by this controller do not come back
// as work.
var helmOpChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() || !e.ObjectNew.GetDeletionTimestamp().IsZero()
	},
}

// Reconcile resolves one HelmOp's chart version when due, writes its Bundle
// when the version or the spec changed, and writes its status once. A
// polling HelmOp comes back at its interval, after a success and after a
// stall alike (a new chart version may fix it); others come back only when
// something they watch changes, or with backoff after a transient error.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	op := &fleet.HelmOp{}
	if found, err := r.ops.Load(ctx, r.Client, req.NamespacedName, op, fleet.HelmOpFinalizer, r.Shard); !found || err != nil {
		return ctrl.Result{}, err
	}
	if !op.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, op)
	}

	s := &scope{op: op, before: op.DeepCopy(), state: r.ops.Get(req.NamespacedName), now: r.Now()}
	var err error
	defer func() { res, retErr = r.end(ctx, s, err) }()
	err = r.reconcileChart(ctx, s)
	return res, retErr
}

// statusEvents are the conditions of a HelmOp whose changes are news.
var statusEvents = []outcome.Watch{{Condition: fleet.ConditionPolled, Action: "Poll"}, {Condition: fleet.ConditionAccepted, Action: "Sync"}}

// end computes the status from what the chart resolution and sync found,
// its Bundle and their deployments; outcome records the events of its
// changes, decides the result (a polling HelmOp's next poll, after a
// success and a stall alike) and writes the status once. A lost status
// write is retried, even after a stall.
func (r *Reconciler) end(ctx context.Context, s *scope, err error) (ctrl.Result, error) {
	var bundle *fleet.Bundle
	b := &fleet.Bundle{}
	gerr := r.Client.Get(ctx, client.ObjectKeyFromObject(s.op), b)
	switch {
	case gerr == nil && b.Labels[fleet.HelmOpLabel] == s.op.Name:
		bundle = b
	case gerr != nil && !apierrors.IsNotFound(gerr):
		return ctrl.Result{}, fmt.Errorf("reading the bundle of HelmOp %s: %w", s.op.Name, gerr)
	}
	bds, derr := r.ownDeployments(s.op)
	if derr != nil {
		return ctrl.Result{}, derr
	}
	setStatus(s.op, s.state, bundle)
	s.op.Status.Resources, s.op.Status.ResourceCounts = summary.Resources(bds)
	return outcome.Finish(ctx, r.Client, s.before, outcome.Input{Object: s.op, Err: err, Recorder: r.Recorder,
		Poll: s.state.poll.Until(s.now, polls(s.op)), Before: s.before.Status.Conditions, Events: statusEvents})
}

// ownDeployments returns the BundleDeployments of the HelmOp's own Bundle,
// as the cache holds them: those of another Bundle that carries the HelmOp's
// label (a GitRepo's fleet.yaml may set any label) are not its own.
func (r *Reconciler) ownDeployments(op *fleet.HelmOp) ([]*fleet.BundleDeployment, error) {
	bds, err := cacheindex.Objects[fleet.BundleDeployment](r.deployments, fleet.HelmOpIndex, op.Namespace+"/"+op.Name)
	if err != nil {
		return nil, fmt.Errorf("reading the BundleDeployments of HelmOp %s: %w", op.Name, err)
	}
	own := make([]*fleet.BundleDeployment, 0, len(bds))
	for _, bd := range bds {
		if bd.Labels[fleet.BundleNameLabel] == op.Name {
			own = append(own, bd)
		}
	}
	return own, nil
}

// reconcileDelete deletes the HelmOp's Bundle, then lets the HelmOp go.
func (r *Reconciler) reconcileDelete(ctx context.Context, op *fleet.HelmOp) error {
	r.ops.Forget(client.ObjectKeyFromObject(op))
	return sourcepoll.Finalize(ctx, r.Client, r.APIReader, op, "HelmOp", fleet.HelmOpFinalizer, fleet.HelmOpLabel, nil)
}
