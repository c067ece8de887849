package capi

import (
	"context"
	"errors"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/secretmeta"
)

// Labels and annotations this controller reads and writes.
const (
	// EnrollLabel set to "false" on a Cluster API Cluster or its namespace
	// opts the cluster out of enrollment.
	EnrollLabel = "fleet.cattle.io/enroll"
	// ClusterClassLabel on a fleet Cluster names the ClusterClass of its
	// Cluster API Cluster.
	ClusterClassLabel = "fleet.cattle.io/cluster-class"
	// ManagedLabelsAnnotation on a fleet Cluster lists, comma-separated, the
	// label keys copied from Cluster API, so that removals are copied too.
	ManagedLabelsAnnotation = "fleet.cattle.io/capi-labels"
	// AgentNamespaceAnnotation on a Cluster API Cluster sets the fleet
	// Cluster's spec.agentNamespace.
	AgentNamespaceAnnotation = "fleet.cattle.io/agent-namespace"
	// ClientIDAnnotation on a Cluster API Cluster sets the fleet Cluster's
	// spec.clientID at creation (default: the workload cluster's kube-system
	// UID, found by the import controller).
	ClientIDAnnotation = "fleet.cattle.io/client-id"
	// CAPIClusterNameAnnotation and CAPIClusterUIDAnnotation on a fleet
	// Cluster record the Cluster API Cluster it was enrolled for. They
	// stand in for an owner reference, which would let a garbage collector
	// delete the fleet Cluster, and with it every deployment, when
	// `clusterctl move` deletes the Cluster API Cluster from the management
	// cluster it leaves.
	CAPIClusterNameAnnotation = "fleet.cattle.io/capi-cluster-name"
	CAPIClusterUIDAnnotation  = "fleet.cattle.io/capi-cluster-uid"
	// DeleteForMoveAnnotation is what `clusterctl move` sets on each object
	// it is about to delete from the management cluster it moves away
	// from (before it strips the finalizers and deletes): the object lives
	// on elsewhere.
	DeleteForMoveAnnotation = "clusterctl.cluster.x-k8s.io/delete-for-move"
	// UnenrolledAnnotation on a Cluster API Cluster records (with the time)
	// that a person deleted its fleet Cluster: the manager removed the
	// agent and does not enroll the cluster again until the annotation is
	// removed.
	UnenrolledAnnotation = "fleet.cattle.io/unenrolled"
	// EnrolledUIDAnnotation on a Cluster API Cluster is its own UID, written
	// once its fleet Cluster was created: a fleet Cluster gone while it is
	// set was deleted by someone, not yet to be created. A copy carried
	// over by `clusterctl move` names another UID and is ignored.
	EnrolledUIDAnnotation = "fleet.cattle.io/enrolled-uid"
)

// FieldOwner is the server-side apply field manager of the FleetAgentReady
// condition on Cluster API Clusters.
const FieldOwner = "fleet-capi"

// AddToScheme adds the Cluster API types this controller reads
// (cluster.x-k8s.io/v1beta2) to s.
func AddToScheme(s *runtime.Scheme) error {
	return clusterv1.AddToScheme(s)
}

// Installed tells whether the API server serves Cluster API's v1beta2
// Clusters; without them the controller cannot start its watch.
func Installed(mapper meta.RESTMapper) (bool, error) {
	_, err := mapper.RESTMapping(clusterv1.GroupVersion.WithKind("Cluster").GroupKind(), clusterv1.GroupVersion.Version)
	if meta.IsNoMatchError(err) {
		return false, nil
	}
	return err == nil, err
}

// Reconciler enrolls Cluster API Clusters as fleet Clusters.
type Reconciler struct {
	Client client.Client
	// APIReader reads a fleet Cluster uncached, to tell one deleted from one
	// the cache has not shown yet (default: the manager's API reader).
	APIReader client.Reader
	// ClusterSelector and NamespaceSelector, when set, switch to opt-in:
	// only Cluster API Clusters whose labels match ClusterSelector, in
	// namespaces whose labels match NamespaceSelector, are enrolled (the
	// opt-out label still wins). Nil matches everything.
	ClusterSelector   labels.Selector
	NamespaceSelector labels.Selector
	// Workers is the number of Clusters reconciled at once.
	Workers int
	// Secrets watches the metadata of Secrets: enrollment waits for a
	// kubeconfig Secret to exist, never reads it (default: a watch of its
	// own).
	Secrets *secretmeta.Watch
	// Recorder records an event each time FleetAgentReady changes (default:
	// the manager's recorder).
	Recorder events.EventRecorder
	// StaleAfter is how long after the agent's last check-in
	// FleetAgentReady stays True (default DefaultStaleAfter).
	StaleAfter time.Duration
	// Now is the clock (default time.Now).
	Now func() time.Time
	// ClassGroups keeps, as Fleet's Cluster API add-on provider does when
	// asked to, a ClusterGroup per ClusterClass in each namespace where an
	// enrolled Cluster uses it, selecting the fleet Clusters of that class
	// (see ClassGroup); default off.
	ClassGroups bool
}

// DefaultStaleAfter is the default of Reconciler.StaleAfter: as long as the
// import controller waits before it takes a silent agent for lost, three of
// the check-ins it configures.
const DefaultStaleAfter = 15 * time.Minute

// SetupWithManager registers the controller. The manager's scheme must hold
// the Cluster API types (AddToScheme).
func (r *Reconciler) SetupWithManager(_ context.Context, mgr ctrl.Manager) error {
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("fleet-capi")
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.StaleAfter <= 0 {
		r.StaleAfter = DefaultStaleAfter
	}
	if r.Now == nil {
		r.Now = time.Now
	}
	if r.Secrets == nil {
		var err error
		if r.Secrets, err = secretmeta.ForManager(mgr); err != nil {
			return err
		}
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&clusterv1.Cluster{}).
		WatchesRawSource(r.Secrets.Source(handler.TypedEnqueueRequestsFromMapFunc(secretToCluster),
			predicate.NewTypedPredicateFuncs(func(o *metav1.PartialObjectMetadata) bool {
				return o.GetLabels()[clusterv1.ClusterNameLabel] != ""
			}))).
		Watches(&fleet.Cluster{}, handler.EnqueueRequestsFromMapFunc(sameName), builder.WithPredicates(fleetClusterChanged())).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.clustersInNamespace), builder.WithPredicates(r.enrollLabelChanged())).
		// A check-in turns FleetAgentReady True: only Clusters where it is
		// not yet are woken, so a heartbeat costs nothing here.
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(r.notReadyOfCheckIn)).
		Named("capi").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Complete(r)
}

// secretToCluster maps a Cluster API Secret to its Cluster by the
// cluster.x-k8s.io/cluster-name label.
func secretToCluster(_ context.Context, o *metav1.PartialObjectMetadata) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetLabels()[clusterv1.ClusterNameLabel]}}}
}

// sameName maps a fleet Cluster to the Cluster API Cluster of the same
// namespace and name: the one that created it, or one waiting for the name.
func sameName(_ context.Context, o client.Object) []reconcile.Request {
	return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
}

// fleetClusterChanged passes what FleetAgentReady and label sync depend on,
// not heartbeats.
func fleetClusterChanged() predicate.Predicate {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, n := e.ObjectOld.(*fleet.Cluster), e.ObjectNew.(*fleet.Cluster)
		return o.Generation != n.Generation ||
			!equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
			!equality.Semantic.DeepEqual(o.Annotations, n.Annotations) ||
			!equality.Semantic.DeepEqual(o.OwnerReferences, n.OwnerReferences) ||
			o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
			!conditions.Same(conditions.Get(o, fleet.ConditionImported), conditions.Get(n, fleet.ConditionImported))
	}}
}

// notReadyOfCheckIn maps an agent's check-in Lease to the Cluster API Cluster
// of its fleet Cluster (same namespace and name) when that one's
// FleetAgentReady is not True.
func (r *Reconciler) notReadyOfCheckIn(ctx context.Context, lease client.Object) []reconcile.Request {
	reqs := checkin.ClusterOfLease(ctx, r.Client, lease)
	if len(reqs) == 0 {
		return nil
	}
	capi := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, reqs[0].NamespacedName, capi); err != nil {
		return nil
	}
	if c := conditions.Get(capi, ConditionFleetAgentReady); c != nil && c.Status == metav1.ConditionTrue {
		return nil
	}
	return reqs
}

// enrollLabelChanged passes the namespace changes that can change what is
// enrolled: the opt-out label, or any label in opt-in mode.
func (r *Reconciler) enrollLabelChanged() predicate.Predicate {
	relevant := func(o client.Object) bool { return r.NamespaceSelector != nil || o.GetLabels()[EnrollLabel] != "" }
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return relevant(e.Object) },
		DeleteFunc: func(event.DeleteEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			if r.NamespaceSelector != nil {
				return !equality.Semantic.DeepEqual(e.ObjectOld.GetLabels(), e.ObjectNew.GetLabels())
			}
			return e.ObjectOld.GetLabels()[EnrollLabel] != e.ObjectNew.GetLabels()[EnrollLabel]
		},
	}
}

func (r *Reconciler) clustersInNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	list := &clusterv1.ClusterList{}
	if err := r.Client.List(ctx, list, client.InNamespace(o.GetName())); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing Cluster API Clusters", "namespace", o.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return reqs
}

// Reconcile enrolls, syncs or removes the fleet Cluster of one Cluster API
// Cluster: the phases run in order over one scope, and one deferred step
// computes FleetAgentReady from what they found and applies it once, when it
// changed.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	capi := &clusterv1.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, capi); err != nil {
		if apierrors.IsNotFound(err) {
			// Gone without this controller's finalizer: moved away.
			return ctrl.Result{}, r.recordMove(ctx, req.NamespacedName, "")
		}
		return ctrl.Result{}, err
	}
	// `clusterctl move` is deleting it here because it lives on in another
	// management cluster: the fleet Cluster stays. Checked before paused,
	// since a moving Cluster is paused.
	if _, ok := capi.Annotations[DeleteForMoveAnnotation]; ok {
		return ctrl.Result{}, r.reconcileMove(ctx, capi)
	}
	// Paused freezes everything, deletion included: Cluster API itself
	// does not proceed either.
	if Paused(capi) {
		return ctrl.Result{}, nil
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("capiCluster", klog.KObj(capi)))
	s := &scope{capi: capi}
	if c := conditions.Get(capi, ConditionFleetAgentReady); c != nil {
		before := *c
		s.before = &before
	}
	if err := r.loadFleetCluster(ctx, s); err != nil {
		return ctrl.Result{}, err
	}
	if !capi.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, s)
	}

	defer func() {
		res, retErr = r.end(ctx, s, retErr)
	}()
	for _, phase := range []func(context.Context, *scope) error{
		r.reconcileOptOut,
		r.reconcileRemovedByPerson,
		r.reconcileObserve,
		r.reconcileEnrollment,
	} {
		if err := phase(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
		if s.optedOut {
			break
		}
	}
	return ctrl.Result{}, nil
}

// end computes FleetAgentReady after a reconcile that ended with err (none
// for an opted-out cluster); outcome records an event when it changed and
// decides the result; this controller's condition of the status it shares
// with Cluster API is applied when it changed. A transient error says
// nothing new about the cluster: the condition stays as it is and the
// reconcile is retried.
func (r *Reconciler) end(ctx context.Context, s *scope, err error) (ctrl.Result, error) {
	if err != nil && !outcome.IsStalling(err) {
		return outcome.Compute(ctx, outcome.Input{Object: s.capi, Err: err})
	}
	var after *metav1.Condition
	in := outcome.Input{Object: s.capi, Err: err, Recorder: r.Recorder,
		Events: []outcome.Watch{{Condition: ConditionFleetAgentReady, Action: "Enroll", Kind: conditionEvent}}}
	if s.before != nil {
		in.Before = []metav1.Condition{*s.before}
	} else {
		in.Before = []metav1.Condition{}
	}
	if s.fleet != nil {
		in.Related = s.fleet
	}
	switch {
	case s.unenrolled != "":
		conditions.Set(s.capi, UnenrolledCondition(s.unenrolled, s.capi.Generation))
		after = conditions.Get(s.capi, ConditionFleetAgentReady)
	case !s.optedOut:
		o := Observed{
			ControlPlaneInitialized: s.initialized, SecretExists: s.secretExists, SecretName: s.secretName(),
			Fleet: s.fleet, Err: err, Now: r.Now(), StaleAfter: r.StaleAfter,
		}
		if s.fleet != nil {
			checkIn, cerr := checkin.LastOf(ctx, r.Client, s.fleet)
			if cerr != nil {
				return ctrl.Result{}, errors.Join(fmt.Errorf("reading the agent's check-in: %w", cerr), err)
			}
			o.CheckIn = checkIn
			if !o.checksIn() && s.before != nil && s.before.Status == metav1.ConditionTrue {
				// About to turn False on the word of the cache, which
				// may lag behind the agent's Lease: read it again first.
				o.CheckIn = checkin.Confirm(ctx, r.APIReader, s.fleet, checkIn)
			}
		}
		in.After = NextCheckInCheck(o)
		conditions.Set(s.capi, FleetAgentReadyCondition(o, s.capi.Generation))
		after = conditions.Get(s.capi, ConditionFleetAgentReady)
	}
	if !conditionChanged(s.before, after) {
		// Neither written nor news.
		in.Recorder = nil
		return outcome.Compute(ctx, in)
	}
	res, rerr := outcome.Compute(ctx, in)
	gvk := clusterv1.GroupVersion.WithKind("Cluster")
	werr := conditions.ApplyStatus(ctx, r.Client, gvk, client.ObjectKeyFromObject(s.capi), statusOf(after), FieldOwner)
	return outcome.Written(res, rerr, werr)
}
