package cluster

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/enqueue"
	"github.com/gitfleet/fleet/internal/ensure"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/summary"
)

// DefaultOfflineAfter is how long a cluster's agent may stay silent before the
// Cluster is shown Offline: three check-ins at the agent's default interval.
const DefaultOfflineAfter = 45 * time.Minute

// Reconciler keeps Cluster namespaces and status.
type Reconciler struct {
	Client  client.Client
	Workers int
	// OfflineAfter is how long an agent may go without checking in before
	// its Cluster is Offline (default DefaultOfflineAfter).
	OfflineAfter time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
}

func (r *Reconciler) offlineAfter() time.Duration {
	if r.OfflineAfter > 0 {
		return r.OfflineAfter
	}
	return DefaultOfflineAfter
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleet.Cluster{}, builder.WithPredicates(CheckInPredicate())).
		// A cluster's status sums its deployments: while thousands change,
		// one write per cluster every few seconds says the same for less.
		Watches(&fleet.BundleDeployment{}, enqueue.After(3*time.Second, func(_ context.Context, o client.Object) []reconcile.Request {
			l := o.GetLabels()
			if l[fleet.ClusterLabel] == "" {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: l[fleet.ClusterNamespaceLabel], Name: l[fleet.ClusterLabel]}}}
		})).
		Named("cluster").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Complete(r)
}

// CheckInPredicate passes spec, label and deletion changes, an agent's first
// check-in and the check-in of an Offline cluster, but not the heartbeats
// that follow, nor the manager's own status writes.
func CheckInPredicate() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*fleet.Cluster), e.ObjectNew.(*fleet.Cluster)
		return o.Generation != n.Generation ||
			!equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
			!equality.Semantic.DeepEqual(o.Finalizers, n.Finalizers) ||
			o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
			o.Status.Agent.LastSeen.IsZero() != n.Status.Agent.LastSeen.IsZero() ||
			(n.Status.Display.State == fleet.ClusterStateOffline && !o.Status.Agent.LastSeen.Equal(&n.Status.Agent.LastSeen))
	}}
}

// Reconcile one Cluster.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	cluster := &fleet.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, cluster); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	ns := names.ClusterNamespace(cluster.Namespace, cluster.Name)
	if !cluster.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, cluster, ns)
	}
	if controllerutil.AddFinalizer(cluster, fleet.ClusterFinalizer) {
		if err := r.Client.Update(ctx, cluster); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := ensure.Namespace(ctx, r.Client, ns, map[string]string{
		fleet.ManagedLabel: "true", fleet.ClusterLabel: cluster.Name, fleet.ClusterNamespaceLabel: cluster.Namespace,
	}); err != nil {
		return ctrl.Result{}, fmt.Errorf("ensuring namespace %s for cluster %s: %w", ns, cluster.Name, err)
	}

	bds := &fleet.BundleDeploymentList{}
	if err := r.Client.List(ctx, bds, client.InNamespace(ns)); err != nil {
		return ctrl.Result{}, err
	}
	before := cluster.DeepCopy()
	now := time.Now()
	if r.Now != nil {
		now = r.Now()
	}
	ComputeStatus(cluster, ns, bds.Items, now, r.offlineAfter())
	// Heartbeats do not wake this controller: it looks again when the
	// cluster would turn Offline without one.
	var result ctrl.Result
	if seen := cluster.Status.Agent.LastSeen; !seen.IsZero() && cluster.Status.Display.State != fleet.ClusterStateOffline {
		result.RequeueAfter = seen.Add(r.offlineAfter()).Sub(now) + time.Second
	}
	if equality.Semantic.DeepEqual(before.Status, cluster.Status) {
		return result, nil
	}
	return result, client.IgnoreNotFound(r.applyStatus(ctx, cluster))
}

// FieldOwner is the field manager of the status fields this controller owns.
const FieldOwner = "fleet-cluster"

// applyStatus writes only this controller's status fields with server-side
// apply: other writers (the agent's check-in, the import controller's
// Imported condition) own theirs, and a stale cache cannot erase them.
func (r *Reconciler) applyStatus(ctx context.Context, cluster *fleet.Cluster) error {
	u, err := StatusApply(cluster)
	if err != nil {
		return err
	}
	return r.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership)
}

// StatusApply is the apply configuration of the status fields this
// controller owns.
func StatusApply(cluster *fleet.Cluster) (*unstructured.Unstructured, error) {
	toMap := func(v interface{}) (map[string]interface{}, error) {
		return runtime.DefaultUnstructuredConverter.ToUnstructured(v)
	}
	conds := []interface{}{}
	for _, t := range []string{fleet.ConditionReady, fleet.ConditionProcessed} {
		c := meta.FindStatusCondition(cluster.Status.Conditions, t)
		if c == nil {
			continue
		}
		m, err := toMap(c)
		if err != nil {
			return nil, err
		}
		conds = append(conds, m)
	}
	st := cluster.Status
	sum, err := toMap(&st.Summary)
	if err != nil {
		return nil, err
	}
	// The counts are sent even when zero. An applied object left with no
	// fields is stored as null by server-side apply (kubernetes#104694),
	// which the schema refuses: a cluster whose last deployment went away
	// would keep its old summary.
	sum["desiredReady"], sum["ready"] = int64(st.Summary.DesiredReady), int64(st.Summary.Ready)
	display, err := toMap(&st.Display)
	if err != nil {
		return nil, err
	}
	return &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": fleet.GroupVersion.String(), "kind": "Cluster",
		"metadata": map[string]interface{}{"name": cluster.Name, "namespace": cluster.Namespace},
		"status": map[string]interface{}{
			"namespace": st.Namespace, "summary": sum, "display": display, "conditions": conds,
		},
	}}, nil
}

// ComputeStatus sets a cluster's status from its BundleDeployments, and marks
// it Offline when its agent last checked in more than offlineAfter before now:
// the statuses it reported may then be out of date.
func ComputeStatus(cluster *fleet.Cluster, ns string, items []fleet.BundleDeployment, now time.Time, offlineAfter time.Duration) {
	bds := make([]*fleet.BundleDeployment, len(items))
	for i := range items {
		bds[i] = &items[i]
	}
	st := &cluster.Status
	st.Namespace = ns
	st.Summary = summary.Of(bds, func(bd *fleet.BundleDeployment) string {
		return bd.Labels[fleet.BundleNamespaceLabel] + "/" + bd.Labels[fleet.BundleNameLabel]
	})
	st.Display.ReadyBundles = fmt.Sprintf("%d/%d", st.Summary.Ready, st.Summary.DesiredReady)
	cond := summary.ReadyCondition(st.Summary, cluster.Generation)
	switch {
	case st.Agent.LastSeen.IsZero():
		st.Display.State = fleet.ClusterStateWaitCheckIn
		cond = metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: fleet.ClusterStateWaitCheckIn,
			Message: "waiting for the agent to check in", ObservedGeneration: cluster.Generation}
	case now.Sub(st.Agent.LastSeen.Time) > offlineAfter:
		st.Display.State = fleet.ClusterStateOffline
		cond = metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: fleet.ClusterStateOffline,
			Message: fmt.Sprintf("the agent has not checked in since %s (more than %s): the status of its deployments may be out of date",
				st.Agent.LastSeen.UTC().Format(time.RFC3339), offlineAfter),
			ObservedGeneration: cluster.Generation}
	default:
		st.Display.State = string(summary.WorstState(st.Summary))
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	meta.SetStatusCondition(&st.Conditions, metav1.Condition{Type: fleet.ConditionProcessed, Status: metav1.ConditionTrue,
		Reason: "Processed", ObservedGeneration: cluster.Generation})
}

func (r *Reconciler) reconcileDelete(ctx context.Context, cluster *fleet.Cluster, ns string) error {
	if !controllerutil.ContainsFinalizer(cluster, fleet.ClusterFinalizer) {
		return nil
	}
	// Without a namespace controller (as in tests) deleting the namespace
	// alone leaves its objects, so the deployments go first.
	if err := r.Client.DeleteAllOf(ctx, &fleet.BundleDeployment{}, client.InNamespace(ns)); client.IgnoreNotFound(err) != nil {
		return err
	}
	if err := r.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); client.IgnoreNotFound(err) != nil {
		return err
	}
	controllerutil.RemoveFinalizer(cluster, fleet.ClusterFinalizer)
	return client.IgnoreNotFound(r.Client.Update(ctx, cluster))
}
