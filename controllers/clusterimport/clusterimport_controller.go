package clusterimport

import (
	"context"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
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
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/secretmeta"
)

// Defaults of the Reconciler's settings.
const (
	DefaultTokenTTL              = fleet.DefaultImportTokenTTL
	DefaultStaleAfter            = 15 * time.Minute
	DefaultCheckInterval         = 5 * time.Minute
	DefaultAgentCheckinInterval  = 5 * time.Minute
	DefaultRemoteTimeout         = 10 * time.Second
	DefaultMaxConcurrentInstalls = 20
)

// FieldOwner is the server-side apply field manager of the status fields
// this controller owns on a Cluster: the Imported condition,
// agentDeployedGeneration, apiServerURL and apiServerCAHash.
const FieldOwner = "fleet-clusterimport"

// Annotations on the agent Deployment downstream: the record of what was
// installed, read back on every check.
const (
	// SettingsHashAnnotation is SettingsHash of the installed settings.
	SettingsHashAnnotation = "fleet.cattle.io/agent-settings-hash"
	// RestartedAtAnnotation, on the pod template, is when an install last
	// (re)started the agent; changing it rolls the pod.
	RestartedAtAnnotation = "fleet.cattle.io/restarted-at"
)

// LocalCluster is the Cluster of the manager's own cluster (kept by
// controllers/localcluster, as Fleet keeps fleet-local/local). Its agent is
// installed like any other, with an import token and the same rights
// upstream, but through Config, the manager's own connection: a copy of the
// manager's credential is never written into a Secret, where it would be
// readable by whoever reads that namespace's Secrets and would go stale
// when the manager's token rotates.
type LocalCluster struct {
	// Cluster is the local Cluster, and Secret the kubeConfigSecret it
	// must name. Only that Cluster naming that Secret is installed through
	// Config; any other Cluster naming the Secret finds no kubeconfig in it.
	Cluster, Secret types.NamespacedName
	// Config is the manager's connection to the cluster it runs in.
	Config *rest.Config
}

func (l *LocalCluster) is(c *fleet.Cluster, secret types.NamespacedName) bool {
	return l != nil && l.Config != nil && client.ObjectKeyFromObject(c) == l.Cluster && secret == l.Secret
}

// Reconciler installs the agent into Clusters that name a kubeconfig Secret.
type Reconciler struct {
	Client client.Client
	// APIReader reads kubeconfig Secrets, uncached (default: the manager's
	// API reader): the manager's cache holds only Secrets it manages.
	APIReader client.Reader
	// Secrets watches the metadata of Secrets, so that a changed kubeconfig
	// Secret brings its Clusters back (default: a watch of its own).
	Secrets *secretmeta.Watch
	// SecretNamespaces are the namespaces from which a Cluster of another
	// namespace may take its kubeconfig Secret. A Cluster always may from
	// its own; from elsewhere only when listed here (default: none), since
	// the manager reads the Secret with its own rights, not the tenant's.
	SecretNamespaces []string
	// APIServerURL and APIServerCA tell agents how to reach the manager,
	// unless the kubeconfig Secret has apiServerURL/apiServerCA keys.
	APIServerURL string
	APIServerCA  []byte
	// Local, when set, is the manager's own cluster: its agent is installed
	// through the manager's own connection rather than a kubeconfig.
	Local *LocalCluster
	// AgentImage (default agentinstall.DefaultImage) and its pull policy.
	AgentImage           string
	AgentImagePullPolicy corev1.PullPolicy
	// AgentBundles: the Cluster's agent Bundle (controllers/agentbundle)
	// carries its agent settings and image once the agent runs, so this
	// controller installs the agent first and repairs it (missing, stale,
	// redeploy, new manager address), each time with the image the agent
	// Bundle has given the cluster so far, and leaves settings changes to
	// the Bundle: one path for every cluster.
	AgentBundles bool
	// AgentTLSMode (strict, the default, or system-store) and
	// AgentGarbageCollectionInterval are written into the agent's
	// ConfigMap, and recorded in the Cluster's status.
	AgentTLSMode                   string
	AgentGarbageCollectionInterval time.Duration
	// AgentImagePullSecrets name Secrets of SystemNamespace that are
	// copied into the agent's namespace and pull its image.
	AgentImagePullSecrets []string
	SystemNamespace       string
	// AgentCheckinInterval is written into the agent's ConfigMap (default
	// 5m, or StaleAfter/3 when that is shorter); at most half of StaleAfter.
	AgentCheckinInterval time.Duration
	// TokenTTL is the lifetime of import tokens (default 12h); a token with
	// less than half of it left is replaced before it is handed out.
	TokenTTL time.Duration
	// StaleAfter: an agent silent (no check-in, no restart) that long is
	// reinstalled (default 15m).
	StaleAfter time.Duration
	// CheckInterval is how often each imported cluster is checked for its
	// agent Deployment (default 5m, or StaleAfter/3 when that is shorter).
	CheckInterval time.Duration
	// RemoteTimeout bounds each call to a downstream cluster (default 10s).
	RemoteTimeout time.Duration
	// RemovalGiveUpAfter: a deleted Cluster whose downstream cluster stays
	// unreachable this long is let go with its agent left in place
	// (default 5m).
	RemovalGiveUpAfter time.Duration
	// MaxConcurrentInstalls caps installs running at once (default 20).
	MaxConcurrentInstalls int
	// Workers is the number of Clusters reconciled at once.
	Workers int
	// Now is the clock (tests may replace it).
	Now func() time.Time
	// Recorder records an event each time the Imported condition turns to
	// a new failure or recovers (default: the manager's recorder).
	Recorder events.EventRecorder

	installs chan struct{}
}

func (r *Reconciler) defaults() {
	if r.Now == nil {
		r.Now = time.Now
	}
	setDefault(&r.TokenTTL, DefaultTokenTTL)
	setDefault(&r.StaleAfter, DefaultStaleAfter)
	// A shorter StaleAfter shortens the check-in and check intervals it
	// depends on, so that setting it alone is enough.
	setDefault(&r.AgentCheckinInterval, min(DefaultAgentCheckinInterval, r.StaleAfter/3))
	setDefault(&r.CheckInterval, min(DefaultCheckInterval, r.StaleAfter/3))
	setDefault(&r.RemoteTimeout, DefaultRemoteTimeout)
	setDefault(&r.RemovalGiveUpAfter, DefaultRemovalGiveUpAfter)
	if r.MaxConcurrentInstalls <= 0 {
		r.MaxConcurrentInstalls = DefaultMaxConcurrentInstalls
	}
	r.installs = make(chan struct{}, r.MaxConcurrentInstalls)
}

func setDefault(d *time.Duration, v time.Duration) {
	if *d <= 0 {
		*d = v
	}
}

// SetupWithManager registers the controller and its index. It relies on the
// spec.clientID index of the clusterregistration controller, which
// controllers.Setup registers first.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	r.defaults()
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("fleet-clusterimport")
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	if r.Secrets == nil {
		var err error
		if r.Secrets, err = secretmeta.ForManager(mgr); err != nil {
			return err
		}
	}
	if r.StaleAfter < 2*r.AgentCheckinInterval {
		return fmt.Errorf("the stale-agent time (%s) must be at least twice the agent check-in interval (%s)", r.StaleAfter, r.AgentCheckinInterval)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &fleet.Cluster{}, fleet.KubeConfigSecretIndex, func(o client.Object) []string {
		c := o.(*fleet.Cluster)
		if c.Spec.KubeConfigSecret == "" {
			return nil
		}
		return []string{secretKey(c).String()}
	}); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleet.Cluster{}, builder.WithPredicates(Predicate())).
		WatchesRawSource(r.Secrets.Source(handler.TypedEnqueueRequestsFromMapFunc(r.clustersOfSecret))).
		// A check-in while the controller waits for one (after an install
		// or restart): the Cluster's lastSeen is not written for every
		// check-in, its Lease is renewed.
		Watches(&coordinationv1.Lease{}, handler.EnqueueRequestsFromMapFunc(r.waitingOfCheckIn)).
		Named("clusterimport").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Complete(r)
}

// Predicate passes imported Clusters' spec, label and deletion changes, a
// move of their Cluster API Cluster, and
// check-ins while the controller waits for one; not the heartbeats of a
// registered agent, which would make every heartbeat a call downstream. It
// also passes an update that lost the Imported condition: another writer's
// merge patch of the whole conditions list from a stale copy drops it, and
// after a terminal error nothing else would bring it back.
func Predicate() predicate.Predicate {
	return predicate.Funcs{
		CreateFunc: func(e event.CreateEvent) bool { return e.Object.(*fleet.Cluster).Spec.KubeConfigSecret != "" },
		DeleteFunc: func(event.DeleteEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, n := e.ObjectOld.(*fleet.Cluster), e.ObjectNew.(*fleet.Cluster)
			if o.Spec.KubeConfigSecret == "" && n.Spec.KubeConfigSecret == "" {
				return false
			}
			return o.Generation != n.Generation ||
				!equality.Semantic.DeepEqual(o.Labels, n.Labels) ||
				o.DeletionTimestamp.IsZero() != n.DeletionTimestamp.IsZero() ||
				o.Annotations[fleet.CAPIMovedAnnotation] != n.Annotations[fleet.CAPIMovedAnnotation] ||
				!o.Status.Agent.LastSeen.Equal(&n.Status.Agent.LastSeen) && importedReason(n) != fleet.ReasonAgentRegistered ||
				importedReason(o) != "" && importedReason(n) == ""
		},
	}
}

// waitingOfCheckIn maps an agent's check-in Lease to its imported Cluster
// while that one's agent is not known to be registered; the heartbeats of a
// registered agent wake nothing.
func (r *Reconciler) waitingOfCheckIn(ctx context.Context, lease client.Object) []reconcile.Request {
	reqs := checkin.ClusterOfLease(ctx, r.Client, lease)
	if len(reqs) == 0 {
		return nil
	}
	c := &fleet.Cluster{}
	if err := r.Client.Get(ctx, reqs[0].NamespacedName, c); err != nil {
		return nil
	}
	if c.Spec.KubeConfigSecret == "" || importedReason(c) == fleet.ReasonAgentRegistered {
		return nil
	}
	return reqs
}

func importedReason(c *fleet.Cluster) string {
	if cond := meta.FindStatusCondition(c.Status.Conditions, fleet.ConditionImported); cond != nil {
		return cond.Reason
	}
	return ""
}

func secretKey(c *fleet.Cluster) types.NamespacedName {
	ns := c.Spec.KubeConfigSecretNamespace
	if ns == "" {
		ns = c.Namespace
	}
	return types.NamespacedName{Namespace: ns, Name: c.Spec.KubeConfigSecret}
}

func (r *Reconciler) clustersOfSecret(ctx context.Context, o *metav1.PartialObjectMetadata) []reconcile.Request {
	list := &fleet.ClusterList{}
	key := types.NamespacedName{Namespace: o.GetNamespace(), Name: o.GetName()}.String()
	if err := r.Client.List(ctx, list, client.MatchingFields{fleet.KubeConfigSecretIndex: key}); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "Listing the Clusters of a kubeconfig Secret", "secret", klog.KObj(o))
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(list.Items))
	for _, c := range list.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&c)})
	}
	return reqs
}

// Reconcile installs or heals the agent of one imported Cluster: the
// phases run in order over one scope, and one deferred step turns their
// outcome into the Imported condition, writes this controller's status
// fields once, and says when to look again.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, retErr error) {
	cluster := &fleet.Cluster{}
	if err := r.Client.Get(ctx, req.NamespacedName, cluster); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if cluster.Spec.KubeConfigSecret == "" {
		// No longer imported: nothing to reach the agent through.
		if controllerutil.ContainsFinalizer(cluster, fleet.AgentRemovalFinalizer) {
			return ctrl.Result{}, r.dropFinalizer(ctx, cluster)
		}
		return ctrl.Result{}, nil
	}
	if !cluster.DeletionTimestamp.IsZero() {
		return r.reconcileDelete(ctx, cluster)
	}
	ctx = ctrl.LoggerInto(ctx, ctrl.LoggerFrom(ctx).WithValues("cluster", klog.KObj(cluster)))

	// The agent's last check-in, from its Lease: status.agent.lastSeen is
	// refreshed only now and then (controllers/cluster).
	checkIn, err := checkin.LastOf(ctx, r.Client, cluster)
	if err != nil {
		return ctrl.Result{}, fmt.Errorf("reading the check-in of cluster %s: %w", cluster.Name, err)
	}
	s := &scope{cluster: cluster, before: ownedStatus(&cluster.Status), now: r.Now(), checkIn: checkIn}
	defer func() {
		// Imported from the phases' outcome, with an event when it
		// changed; this controller's fields of the shared status are
		// applied when they changed; after a success, come back at the
		// next check.
		in := importedOutcome(cluster, retErr, s.registered)
		in.Recorder = r.Recorder
		if retErr == nil {
			in.After = NextCheck(s.checkIn, s.restartedAt, s.now, r.StaleAfter, r.CheckInterval)
		}
		res, retErr = outcome.Compute(ctx, in)
		var werr error
		if status := ownedStatus(&cluster.Status); !equality.Semantic.DeepEqual(s.before, status) {
			werr = conditions.ApplyStatus(ctx, r.Client, fleet.GroupVersion.WithKind("Cluster"), client.ObjectKeyFromObject(cluster), status, FieldOwner)
		}
		res, retErr = outcome.Written(res, retErr, werr)
	}()
	for _, phase := range []func(context.Context, *scope) error{
		r.reconcileMoved,
		r.reconcileFinalizer,
		r.reconcileKubeconfig,
		r.reconcileIdentity,
		r.reconcileElsewhere,
		r.reconcileDeployed,
		r.reconcileInstall,
		r.reconcileToken,
	} {
		if err := phase(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	return ctrl.Result{}, nil
}

// deleteToken removes the import token of a Cluster being deleted (its
// owner reference does the same where a garbage collector runs).
func (r *Reconciler) deleteToken(ctx context.Context, c *fleet.Cluster) error {
	token := &fleet.ClusterRegistrationToken{ObjectMeta: metav1.ObjectMeta{Namespace: c.Namespace, Name: names.ImportToken(c.Name)}}
	return client.IgnoreNotFound(r.Client.Delete(ctx, token))
}
