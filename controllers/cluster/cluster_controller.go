package cluster

import (
	"context"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/enqueue"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/outcome"
)

// DefaultOfflineAfter is how long a cluster's agent may stay silent before the
// Cluster is shown Offline: three check-ins at the agent's default interval.
const DefaultOfflineAfter = 45 * time.Minute

// DefaultLastSeenRefresh is how stale status.agent.lastSeen may grow while
// the agent keeps renewing its check-in Lease before the manager writes it
// again: one Cluster write per agent per hour at most, none for the
// heartbeats in between, whatever the check-in interval.
const DefaultLastSeenRefresh = time.Hour

// DefaultSummaryInterval is how often at most a Cluster's summary of its
// deployments is written while they change: during a fan-out to thousands of
// clusters each one's counts and state move with every deployment created
// and reported Ready, and writing each step cost the API server about as
// much as the deployments themselves. A change waits this long from when
// it is first seen too, so that deployments updated and Ready again within
// it cost their Cluster no write at all. What the summary shows lags by up
// to this much (SummaryHold during a rollout); the last state is always
// written, and what its agent decides (a first check-in, Offline) or a
// failure to process is written at once.
const DefaultSummaryInterval = 10 * time.Second

// DefaultSummaryHold is how long at most a Cluster's summary waits while
// it says a rollout is under way (deployments WaitApplied: given a
// deploymentID their agent has not applied yet, or OutOfSync: staged,
// waiting for their turn), from when the rollout was first seen and from
// the last write: during a rollout the counts move with every deployment
// staged, patched and applied, and the summary written once they land says
// what the steps in between would have said, one write instead of one every
// SummaryInterval. A commit rolled out to a cluster that is Ready before and
// after, within this time, costs its Cluster no write (1.6-1.8 writes per
// cluster before, at 1000 clusters); what its deployments do in
// the meantime shows on the Bundles and the GitRepo, whose counts are
// written every few seconds. A rollout that starts with a deployment failed
// or modified (failing), and anything the agent decides, are not held by it.
const DefaultSummaryHold = time.Minute

// FieldOwner is the field manager of the status fields this controller owns
// (namespace, summary, display, and the Ready and Processed conditions): the
// agent's check-in and the import controller's Imported condition are
// written by others under their own.
const FieldOwner = "fleet-cluster"

// Reconciler keeps Cluster namespaces and status.
type Reconciler struct {
	Client client.Client
	// APIReader reads past the cache: a check-in Lease that would turn a
	// Cluster Offline is read again from the API server first (default
	// mgr.GetAPIReader(); nil reads only the cache).
	APIReader client.Reader
	// Recorder records an event when a Cluster's Processed condition turns
	// to a new failure or recovers; default
	// mgr.GetEventRecorder("fleet-cluster").
	Recorder events.EventRecorder
	// Workers is the number of Clusters reconciled at once.
	Workers int
	// OfflineAfter is how long an agent may go without checking in before
	// its Cluster is Offline (default DefaultOfflineAfter).
	OfflineAfter time.Duration
	// LastSeenRefresh is how old status.agent.lastSeen may grow before a
	// renewal of the agent's Lease is written into it (default
	// DefaultLastSeenRefresh); first check-ins and the return of an Offline
	// cluster are written at once.
	LastSeenRefresh time.Duration
	// AgentNamespace holds the agents' ServiceAccounts
	// (clusterregistration.Reconciler.AgentNamespace): deleting a Cluster
	// deletes those of its agents, revoking their credentials. Empty: none.
	AgentNamespace string
	// SummaryInterval is the least time between two writes of a Cluster's
	// status that change only its summary of deployments, and how long
	// such a change waits from when it is first seen (default
	// DefaultSummaryInterval); the first check-in, Offline and failures
	// are written at once.
	SummaryInterval time.Duration
	// SummaryHold is how long at most a summary that shows a rollout under
	// way is held back while it still is, from when the rollout was first
	// seen and from the last write (default DefaultSummaryHold).
	SummaryHold time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time

	// written is when each Cluster's status was last written by this
	// process (types.NamespacedName to time.Time).
	written sync.Map
	// held is when a change of each Cluster's summary not yet written was
	// first held back (types.NamespacedName to time.Time); gone once it is
	// written, or once the summary is back to what was written.
	held sync.Map
}

func (r *Reconciler) summaryHold() time.Duration {
	if r.SummaryHold > 0 {
		return r.SummaryHold
	}
	return DefaultSummaryHold
}

func (r *Reconciler) summaryInterval() time.Duration {
	if r.SummaryInterval > 0 {
		return r.SummaryInterval
	}
	return DefaultSummaryInterval
}

func (r *Reconciler) lastSeenRefresh() time.Duration {
	if r.LastSeenRefresh > 0 {
		return r.LastSeenRefresh
	}
	return DefaultLastSeenRefresh
}

func (r *Reconciler) offlineAfter() time.Duration {
	if r.OfflineAfter > 0 {
		return r.OfflineAfter
	}
	return DefaultOfflineAfter
}

// SetupWithManager registers the controller.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("fleet-cluster")
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
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
		// An agent's check-in Lease wakes its Cluster only when folding it
		// changes what is shown (foldCheckIn): a heartbeat costs a cache
		// read and no write.
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(r.clusterOfCheckIn)).
		Named("cluster").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Complete(r)
}

// clusterOfCheckIn maps a check-in Lease to its Cluster when folding it in
// changes the Cluster's status.
func (r *Reconciler) clusterOfCheckIn(ctx context.Context, o client.Object) []reconcile.Request {
	lease, ok := o.(*coordinationv1.Lease)
	if !ok {
		return nil
	}
	reqs := checkin.ClusterOfLease(ctx, r.Client, lease)
	if len(reqs) == 0 {
		return nil
	}
	cluster := &fleet.Cluster{}
	if err := r.Client.Get(ctx, reqs[0].NamespacedName, cluster); err != nil {
		return nil
	}
	if foldCheckIn(cluster.Status, lease, r.lastSeenRefresh()) == cluster.Status.Agent {
		return nil
	}
	return reqs
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

// scope is what one reconcile's phases share.
type scope struct {
	cluster *fleet.Cluster
	// lease is the agent's check-in Lease, nil when there is none.
	lease *coordinationv1.Lease
	// namespace is the cluster namespace, where its BundleDeployments live.
	namespace string
	// deployments are the cluster's BundleDeployments; nil until listed.
	deployments []fleet.BundleDeployment
	now         time.Time
}

// Reconcile keeps one Cluster's namespace and sums its deployments into its
// status, written once at the end with server-side apply.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, reterr error) {
	cluster := &fleet.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, cluster); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	s := &scope{cluster: cluster, namespace: names.ClusterNamespaceFor(cluster.Namespace, cluster.Name, cluster.Status.Namespace), now: r.now()}
	if !cluster.DeletionTimestamp.IsZero() {
		return outcome.Result(r.reconcileDelete(ctx, s), 0)
	}
	if controllerutil.AddFinalizer(cluster, fleet.ClusterFinalizer) {
		if err := r.Client.Update(ctx, cluster); err != nil {
			return ctrl.Result{}, err
		}
	}
	before := cluster.DeepCopy()
	defer func() {
		result, reterr = r.end(ctx, s, before, reterr)
	}()
	for _, phase := range []func(context.Context, *scope) error{r.ensureNamespace, r.readCheckIn, r.listDeployments} {
		if err := phase(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

func (r *Reconciler) now() time.Time {
	if r.Now != nil {
		return r.Now()
	}
	return time.Now()
}

// end computes the cluster's status from what the reconcile saw, turns
// its error into the Processed condition, an event and the result
// (outcome), and writes this controller's status fields once, when they
// changed and are not held back (summaryWait).
func (r *Reconciler) end(ctx context.Context, s *scope, before *fleet.Cluster, err error) (ctrl.Result, error) {
	c := s.cluster
	if err == nil {
		r.confirmOffline(ctx, s)
	}
	c.Status.Agent = foldCheckIn(c.Status, s.lease, r.lastSeenRefresh())
	checkIn := checkin.Last(c, s.lease)
	if s.deployments != nil {
		computeStatus(c, s.namespace, s.deployments, checkIn, s.now, r.offlineAfter())
	}
	in := outcome.Input{Object: c, Condition: fleet.ConditionProcessed, SuccessReason: fleet.ReasonProcessed,
		FallbackReason: fleet.ReasonError, Err: err, Recorder: r.Recorder, Action: "Process"}
	if err == nil {
		in.After = offlineCheck(c, checkIn, s.now, r.offlineAfter())
	}
	result, rerr := outcome.Compute(ctx, in)
	was, owned := ownedStatus(before), ownedStatus(c)
	key := client.ObjectKeyFromObject(c)
	if equality.Semantic.DeepEqual(was, owned) {
		// Back to what was written (deployments updated and Ready again
		// within the interval): nothing held any more.
		r.held.Delete(key)
		return result, rerr
	}
	if wait := r.summaryWait(key, was, owned, s.now); wait > 0 {
		// Only the summary moved, moments ago or while deployments are
		// in flight: the next write, in wait, shows where it got to by
		// then.
		if result.RequeueAfter == 0 || wait < result.RequeueAfter {
			result.RequeueAfter = wait
		}
		return result, rerr
	}
	var werr error
	if before.Status.Namespace == "" || before.Status.Display == (fleet.ClusterDisplay{}) {
		// Clusters that never had this controller's status get it applied,
		// so that its fields are owned (FieldOwner) from the start.
		werr = conditions.ApplyStatus(ctx, r.Client, fleet.GroupVersion.WithKind("Cluster"), key, owned, FieldOwner)
	} else {
		// A merge patch of only what changed is lighter for the API server
		// than an apply of the whole owned status. It replaces a list
		// whole: when the conditions changed and someone else may write one
		// of them (the import controller's Imported condition), it is
		// guarded by before's resourceVersion, so that a concurrent write
		// makes it conflict and come back (outcome.Wait) rather than be
		// overwritten.
		lock := !equality.Semantic.DeepEqual(before.Status.Conditions, c.Status.Conditions) && sharedConditions(before)
		werr = outcome.PatchStatus(ctx, r.Client, before, c, outcome.WithFieldOwner(FieldOwner), outcome.WithOptimisticLock(lock))
	}
	if werr == nil {
		r.written.Store(key, s.now)
		r.held.Delete(key)
	}
	return outcome.Written(result, rerr, werr)
}

// summaryWait is how long to hold back a status change from was to owned.
// Anything but the summary (a first check-in, a lastSeen refresh, Offline,
// a failure to process) is written at once. A change of the summary alone
// waits SummaryInterval from when it was first held, and from the last
// write: deployments updated and Ready again within it leave the summary
// as it was, and nothing is written. A rollout that starts (the summary
// computed shows one under way and no failure, the one written no rollout)
// waits until it lands, or SummaryHold from when it was first held: a rollout that lands
// within it, back to what was written, costs the Cluster no write at all,
// and one that lands later is written once it does and as it goes at most
// every SummaryHold. While the summary written and the one computed both
// show a rollout under way, it waits until it lands, or SummaryHold after
// the last write.
func (r *Reconciler) summaryWait(key client.ObjectKey, was, owned status, now time.Time) time.Duration {
	if !summaryOnly(was, owned) {
		return 0
	}
	first, _ := r.held.LoadOrStore(key, now)
	hold := r.summaryInterval()
	if rollingOut(owned) && !rollingOut(was) && !failing(owned) {
		hold = max(hold, r.summaryHold())
	}
	wait := first.(time.Time).Add(hold).Sub(now)
	last, ok := r.written.Load(key)
	if !ok {
		return wait
	}
	every := r.summaryInterval()
	if rollingOut(was) && rollingOut(owned) {
		every = max(every, r.summaryHold())
	}
	return max(wait, last.(time.Time).Add(every).Sub(now))
}

// rollingOut tells whether a summary shows a rollout under way: deployments
// their agents have not applied yet, and have not failed to (WaitApplied),
// or staged and waiting for their turn (OutOfSync).
func rollingOut(st status) bool {
	return st.Summary.WaitApplied > 0 || st.Summary.OutOfSync > 0
}

// failing tells whether a summary shows deployments that failed to apply
// or drifted: a rollout that starts with those is not held past the
// interval.
func failing(st status) bool {
	return st.Summary.ErrApplied > 0 || st.Summary.Modified > 0
}

// summaryOnly tells whether was and owned differ only in what sums up the
// cluster's deployments (the summary, resource and GitRepo counts, ready
// bundles, the state they decide and the Ready condition that follows from
// them): not in its namespace, its agent's check-in, Offline or WaitCheckIn,
// nor its Processed condition.
func summaryOnly(was, owned status) bool {
	if was.Namespace != owned.Namespace || !equality.Semantic.DeepEqual(was.Agent, owned.Agent) ||
		was.Display == nil || owned.Display == nil ||
		!deploymentState(was.Display.State) || !deploymentState(owned.Display.State) ||
		len(was.Conditions) != len(owned.Conditions) {
		return false
	}
	for i, c := range owned.Conditions {
		if c.Type != was.Conditions[i].Type || (c.Type != fleet.ConditionReady && !equality.Semantic.DeepEqual(was.Conditions[i], c)) {
			return false
		}
	}
	return true
}

// deploymentState tells whether a displayed cluster state is one its
// deployments decide, not its agent (WaitCheckIn, Offline).
func deploymentState(state string) bool {
	return state != fleet.ClusterStateWaitCheckIn && state != fleet.ClusterStateOffline
}

// sharedConditions tells whether another writer may change a condition of
// the cluster: it has one this controller does not write, or it is imported
// by kubeconfig (the import controller writes Imported).
func sharedConditions(c *fleet.Cluster) bool {
	if c.Spec.KubeConfigSecret != "" {
		return true
	}
	for _, cond := range c.Status.Conditions {
		if cond.Type != fleet.ConditionReady && cond.Type != fleet.ConditionProcessed {
			return true
		}
	}
	return false
}

// reconcileDelete removes the cluster's deployments and namespace, then lets
// it go.
func (r *Reconciler) reconcileDelete(ctx context.Context, s *scope) error {
	cluster := s.cluster
	if !controllerutil.ContainsFinalizer(cluster, fleet.ClusterFinalizer) {
		return nil
	}
	// The agent is removed downstream first, so that it is not there to
	// uninstall the releases when their deployments go; the removal of
	// that finalizer brings the Cluster back.
	if controllerutil.ContainsFinalizer(cluster, fleet.AgentRemovalFinalizer) {
		return nil
	}
	// A cluster registered by token: the manager cannot reach its agent, so
	// the order of revoking it and deleting its deployments decides what
	// happens to the releases. To keep them (the default), the agent is
	// revoked first: it confirms a deployment is gone with the API server
	// before uninstalling, which a revoked agent cannot. To uninstall them,
	// the deployments go first and the agent keeps its credential for
	// UninstallGrace.
	token := cluster.Spec.KubeConfigSecret == ""
	if token && fleet.KeepResourcesOnUnenroll(cluster) && cluster.Annotations[fleet.AgentsRevokedAnnotation] == "" {
		if err := r.revokeAgents(ctx, s); err != nil {
			return err
		}
		// The API server caches a token's authentication for a few
		// seconds after its ServiceAccount goes; authorization is not
		// cached, so the agent's bindings in its namespace go too.
		if err := r.Client.DeleteAllOf(ctx, &rbacv1.RoleBinding{}, client.InNamespace(s.namespace),
			client.MatchingLabels{fleet.ManagedLabel: "true"}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("revoking the agent's rights in %s: %w", s.namespace, err)
		}
		patch := client.MergeFrom(cluster.DeepCopy())
		if cluster.Annotations == nil {
			cluster.Annotations = map[string]string{}
		}
		cluster.Annotations[fleet.AgentsRevokedAnnotation] = s.now.UTC().Format(time.RFC3339)
		if err := r.Client.Patch(ctx, cluster, patch); err != nil {
			return client.IgnoreNotFound(err)
		}
	}
	// Without a namespace controller (as in tests) deleting the namespace
	// alone leaves its objects, so the deployments go first.
	if err := r.Client.DeleteAllOf(ctx, &fleet.BundleDeployment{}, client.InNamespace(s.namespace)); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if token && !fleet.KeepResourcesOnUnenroll(cluster) {
		if left := fleet.UninstallGrace - s.now.Sub(cluster.DeletionTimestamp.Time); left > 0 {
			return outcome.Waitf(fleet.ReasonRemovingAgent, left, "the agent of cluster %s uninstalls its releases (keep-resources-on-unenroll: false) before its credential is revoked", cluster.Name)
		}
	}
	if err := r.Client.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.namespace}}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := r.revokeAgents(ctx, s); err != nil {
		return err
	}
	controllerutil.RemoveFinalizer(cluster, fleet.ClusterFinalizer)
	r.written.Delete(client.ObjectKeyFromObject(cluster))
	r.held.Delete(client.ObjectKeyFromObject(cluster))
	return client.IgnoreNotFound(r.Client.Update(ctx, cluster))
}
