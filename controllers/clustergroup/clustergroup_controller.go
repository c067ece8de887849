package clustergroup

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/enqueue"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/target"
)

// Reconciler keeps ClusterGroup status.
type Reconciler struct {
	Client client.Client
	// Recorder records an event when a group's selector turns invalid or is
	// fixed; default mgr.GetEventRecorder("fleet-clustergroup").
	Recorder events.EventRecorder
	// Workers is the number of ClusterGroups reconciled at once.
	Workers int
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("fleet-clustergroup")
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleet.ClusterGroup{}).
		Watches(&fleet.Cluster{}, enqueue.After(time.Second, r.groupsInNamespace), builder.WithPredicates(enqueue.IgnoreHeartbeats())).
		Named("clustergroup").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Complete(r)
}

// groupsInNamespace maps a Cluster to every group of its namespace: which
// of them select it is for their reconciles to find out.
func (r *Reconciler) groupsInNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	groups := &fleet.ClusterGroupList{}
	if err := r.Client.List(ctx, groups, client.InNamespace(o.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing ClusterGroups failed: their status may not count this change", "cluster", klog.KObj(o))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(groups.Items))
	for _, g := range groups.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: g.Namespace, Name: g.Name}})
	}
	return reqs
}

// scope is what one reconcile's phases share.
type scope struct {
	group    *fleet.ClusterGroup
	compiled *target.CompiledGroup
	// members are the clusters the selector matches; nil until counted.
	members []*fleet.Cluster
}

// Reconcile counts one ClusterGroup's clusters and sums their status, written
// once at the end (outcome.Finish).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, reterr error) {
	group := &fleet.ClusterGroup{}
	if err := r.Client.Get(ctx, req.NamespacedName, group); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s := &scope{group: group}
	before := group.DeepCopy()
	defer func() {
		// The status sums the members on success; on failure Ready says
		// what failed (outcome), with an event when that is news.
		in := outcome.Input{Object: group, Err: reterr, Recorder: r.Recorder, Action: "Count", FallbackReason: fleet.ReasonError}
		if reterr == nil {
			computeStatus(group, s.members)
		} else {
			in.Condition = fleet.ConditionReady
		}
		result, reterr = outcome.Finish(ctx, r.Client, before, in)
	}()
	for _, phase := range []func(context.Context, *scope) error{r.compile, r.countMembers} {
		if err := phase(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// compile compiles the group's selector. An invalid one is the user's to
// fix: Ready turns False with ReasonInvalidSelector, and the group is not
// retried until it changes.
func (r *Reconciler) compile(_ context.Context, s *scope) error {
	c, err := target.CompileGroup(s.group)
	if err != nil {
		return outcome.Stallf(fleet.ReasonInvalidSelector, "invalid spec.selector, fix it: %v", err)
	}
	s.compiled = c
	return nil
}

// countMembers finds the clusters of the group's namespace its selector
// matches.
func (r *Reconciler) countMembers(ctx context.Context, s *scope) error {
	clusters := &fleet.ClusterList{}
	if err := r.Client.List(ctx, clusters, client.InNamespace(s.group.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return err
	}
	s.members = []*fleet.Cluster{}
	for i := range clusters.Items {
		if s.compiled.Matches(clusters.Items[i].Labels) {
			s.members = append(s.members, &clusters.Items[i])
		}
	}
	return nil
}
