package schedule

import (
	"context"
	"errors"
	"maps"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/target"
)

// FieldOwner owns a Cluster's status.scheduled and status.activeSchedule.
const FieldOwner = "fleet-schedule"

// lateBy is how long after a window's boundary the reconcile comes back, so
// that the clock has passed it.
const lateBy = 20 * time.Millisecond

// Reconciler keeps the Schedules of a namespace and their clusters'
// scheduled and activeSchedule.
type Reconciler struct {
	Client client.Client
	// Recorder records an event when a Schedule turns invalid or is fixed;
	// default mgr.GetEventRecorder("fleet-schedule").
	Recorder events.EventRecorder
	// Workers is the number of namespaces reconciled at once.
	Workers int
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("fleet-schedule")
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	ns := handler.EnqueueRequestsFromMapFunc(namespaceOf)
	return ctrl.NewControllerManagedBy(mgr).
		Named("schedule").
		Watches(&fleet.Schedule{}, ns, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&fleet.Cluster{}, ns, builder.WithPredicates(targetingChanged())).
		Watches(&fleet.ClusterGroup{}, ns, builder.WithPredicates(targetingChanged())).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Complete(r)
}

// namespaceOf maps an object to its namespace's reconcile.
func namespaceOf(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace()}}}
}

// targetingChanged lets through what changes which clusters a Schedule
// selects: creations, deletions, label and spec changes (a group's
// selector), and a status write by someone else that reset this
// controller's fields.
func targetingChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		if e.ObjectOld.GetGeneration() != e.ObjectNew.GetGeneration() || !maps.Equal(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels()) {
			return true
		}
		o, ok1 := e.ObjectOld.(*fleet.Cluster)
		n, ok2 := e.ObjectNew.(*fleet.Cluster)
		return ok1 && ok2 && (o.Status.Scheduled != n.Status.Scheduled || o.Status.ActiveSchedule != n.Status.ActiveSchedule)
	}}
}

// scope is what one reconcile's phases share.
type scope struct {
	namespace string
	now       time.Time
	schedules []fleet.Schedule
	clusters  []fleet.Cluster
	infos     []*target.ClusterInfo
	evals     []Evaluation
}

// Reconcile evaluates the Schedules of one namespace, writes their status
// and their clusters' scheduled and activeSchedule, and comes back at the
// next window's start or end.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	s := &scope{namespace: req.Namespace, now: r.Now()}
	for _, phase := range []func(context.Context, *scope) error{r.read, r.evaluate, r.writeSchedules, r.writeClusters} {
		if err := phase(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	next := NextChange(s.evals)
	if next.IsZero() {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{RequeueAfter: max(next.Sub(r.Now()), 0) + lateBy}, nil
}

// read lists the namespace's Schedules, Clusters and ClusterGroups and
// describes each cluster with the groups that select it (a group whose
// selector is invalid selects none; its own status says so).
func (r *Reconciler) read(ctx context.Context, s *scope) error {
	schedules := &fleet.ScheduleList{}
	if err := r.Client.List(ctx, schedules, client.InNamespace(s.namespace)); err != nil {
		return err
	}
	s.schedules = schedules.Items
	clusters := &fleet.ClusterList{}
	if err := r.Client.List(ctx, clusters, client.InNamespace(s.namespace)); err != nil {
		return err
	}
	s.clusters = clusters.Items
	if len(s.schedules) == 0 {
		// Nothing to match: every cluster is released.
		return nil
	}
	groups := &fleet.ClusterGroupList{}
	if err := r.Client.List(ctx, groups, client.InNamespace(s.namespace), client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	var compiled []*target.CompiledGroup
	for i := range groups.Items {
		if g, err := target.CompileGroup(&groups.Items[i]); err == nil {
			compiled = append(compiled, g)
		}
	}
	for i := range s.clusters {
		if s.clusters[i].DeletionTimestamp.IsZero() {
			s.infos = append(s.infos, target.ClusterInfoFor(&s.clusters[i], compiled))
		}
	}
	return nil
}

func (r *Reconciler) evaluate(_ context.Context, s *scope) error {
	for i := range s.schedules {
		s.evals = append(s.evals, Evaluate(&s.schedules[i], s.infos, s.now))
	}
	return nil
}

// writeSchedules writes each Schedule's status; an invalid one gets Ready
// False naming the field, with an event when that is news.
func (r *Reconciler) writeSchedules(ctx context.Context, s *scope) error {
	var errs []error
	for i := range s.schedules {
		sched := &s.schedules[i]
		before := sched.DeepCopy()
		ComputeStatus(sched, s.evals[i])
		// The result is this controller's to decide (the namespace's next
		// window): only the condition and the event are wanted here.
		_, _ = outcome.Compute(ctx, outcome.Input{
			Object: sched, Condition: fleet.ConditionReady, SuccessReason: fleet.ReasonReady,
			FallbackReason: fleet.ReasonError, Err: s.evals[i].Err, Recorder: r.Recorder, Action: "Evaluate",
		})
		if err := outcome.PatchStatus(ctx, r.Client, before, sched); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// writeClusters writes scheduled and activeSchedule of each cluster whose
// values changed, under this controller's field owner.
func (r *Reconciler) writeClusters(ctx context.Context, s *scope) error {
	want := ClusterStatus(s.evals)
	var errs []error
	for i := range s.clusters {
		c := &s.clusters[i]
		f := want[c.Name]
		if c.Status.Scheduled == f.Scheduled && c.Status.ActiveSchedule == f.ActiveSchedule {
			continue
		}
		ctrl.LoggerFrom(ctx).Info("Cluster's deployment window changed", "cluster", klog.KObj(c), "scheduled", f.Scheduled, "activeSchedule", f.ActiveSchedule)
		if err := conditions.ApplyStatus(ctx, r.Client, fleet.GroupVersion.WithKind("Cluster"), client.ObjectKeyFromObject(c), f, FieldOwner); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
