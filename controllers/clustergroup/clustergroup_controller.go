package clustergroup

import (
	"context"
	"fmt"
	"sort"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/enqueue"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/internal/target"
)

// Reconciler keeps ClusterGroup status.
type Reconciler struct {
	Client  client.Client
	Workers int
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleet.ClusterGroup{}).
		Watches(&fleet.Cluster{}, enqueue.After(time.Second, func(ctx context.Context, o client.Object) []reconcile.Request {
			groups := &fleet.ClusterGroupList{}
			if err := r.Client.List(ctx, groups, client.InNamespace(o.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil {
				return nil
			}
			reqs := make([]reconcile.Request, 0, len(groups.Items))
			for _, g := range groups.Items {
				reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: g.Namespace, Name: g.Name}})
			}
			return reqs
		}), builder.WithPredicates(enqueue.IgnoreHeartbeats())).
		Named("clustergroup").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Complete(r)
}

// Reconcile one ClusterGroup.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	group := &fleet.ClusterGroup{}
	if err := r.Client.Get(ctx, req.NamespacedName, group); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	before := group.DeepCopy()
	compiled, err := target.CompileGroup(group)
	if err != nil {
		meta.SetStatusCondition(&group.Status.Conditions, metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse,
			Reason: "InvalidSelector", Message: fmt.Sprintf("spec.selector: %v", err), ObservedGeneration: group.Generation})
		if perr := r.Client.Status().Patch(ctx, group, client.MergeFrom(before)); perr != nil {
			return ctrl.Result{}, perr
		}
		return ctrl.Result{}, reconcile.TerminalError(err)
	}
	clusters := &fleet.ClusterList{}
	if err := r.Client.List(ctx, clusters, client.InNamespace(group.Namespace), client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, err
	}
	var members []*fleet.Cluster
	for i := range clusters.Items {
		if compiled.Matches(clusters.Items[i].Labels) {
			members = append(members, &clusters.Items[i])
		}
	}
	ComputeStatus(group, members)
	if equality.Semantic.DeepEqual(before.Status, group.Status) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, client.IgnoreNotFound(r.Client.Status().Patch(ctx, group, client.MergeFrom(before)))
}

// ComputeStatus sets a group's status from its member clusters.
func ComputeStatus(group *fleet.ClusterGroup, members []*fleet.Cluster) {
	st := &group.Status
	st.ClusterCount = len(members)
	st.Summary = fleet.BundleSummary{}
	var nonReady []string
	for _, c := range members {
		summary.Merge(&st.Summary, c.Status.Summary)
		if !meta.IsStatusConditionTrue(c.Status.Conditions, fleet.ConditionReady) {
			nonReady = append(nonReady, c.Name)
		}
	}
	sort.Strings(nonReady)
	st.NonReadyClusterCount = len(nonReady)
	if len(nonReady) > summary.MaxNonReady {
		nonReady = nonReady[:summary.MaxNonReady]
	}
	st.NonReadyClusters = nonReady
	st.Display.ReadyClusters = fmt.Sprintf("%d/%d", st.ClusterCount-st.NonReadyClusterCount, st.ClusterCount)
	st.Display.ReadyBundles = fmt.Sprintf("%d/%d", st.Summary.Ready, st.Summary.DesiredReady)
	st.Display.State = string(summary.WorstState(st.Summary))
	cond := summary.ReadyCondition(st.Summary, group.Generation)
	if st.NonReadyClusterCount > 0 && cond.Status == metav1.ConditionTrue {
		cond = metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: "NotReady",
			Message: fmt.Sprintf("%d cluster(s) not ready: %v", st.NonReadyClusterCount, st.NonReadyClusters), ObservedGeneration: group.Generation}
	}
	meta.SetStatusCondition(&st.Conditions, cond)
}
