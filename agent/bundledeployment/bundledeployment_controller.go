package bundledeployment

import (
	"context"
	"crypto/ecdh"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/gitfleet/fleet/agent/deployrpc"
	"github.com/gitfleet/fleet/agent/monitor"
	"github.com/gitfleet/fleet/agent/release"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// Defaults of the Reconciler's settings.
const (
	// DefaultWorkers is the default of Reconciler.Workers.
	DefaultWorkers = 4
	// DefaultResync is the default of Reconciler.Resync.
	DefaultResync = 5 * time.Minute
	// DefaultMaxBackoff is the default of Reconciler.MaxBackoff.
	DefaultMaxBackoff = time.Minute
	// apiTimeout bounds each single call to the manager's API server.
	apiTimeout = 30 * time.Second
)

// Downstream is the agent's own cluster as the reconciler needs it; in
// production a *downstream.Cluster, whose installs, upgrades and uninstalls
// run the fleet-agent-deploy binary.
type Downstream interface {
	// Deploy installs or upgrades a BundleDeployment's release.
	Deploy(ctx context.Context, d deployrpc.Deploy) error
	// Uninstall removes a release (its latest revision).
	Uninstall(ctx context.Context, rel *release.Release) error
	// Correct applies again modified or missing objects of a release and
	// deletes extra ones.
	Correct(ctx context.Context, key release.Key, serviceAccount string, apply, remove []*unstructured.Unstructured, force bool) error
	// Last and Deployed return a release's latest and latest deployed
	// revisions; nil when there is none.
	Last(ctx context.Context, key release.Key) (*release.Release, error)
	Deployed(ctx context.Context, key release.Key) (*release.Release, error)
	// Owned returns the latest revision of every release of this agent.
	Owned(ctx context.Context) ([]*release.Release, error)
	// Scope tells whether a kind is namespaced, and whether it is known.
	Scope(gvk schema.GroupVersionKind) (namespaced, known bool)
}

// Reconciler deploys the BundleDeployments of one cluster namespace.
type Reconciler struct {
	// Upstream reads BundleDeployments from the namespace-restricted cache
	// and patches their status.
	Upstream client.Client
	// APIReader reads Contents directly: the agent may get them, not list or
	// watch them.
	APIReader client.Reader
	// Cache is the cache behind Upstream.
	Cache cache.Cache
	// ClusterNamespace is the agent's cluster namespace upstream.
	ClusterNamespace string
	// SealingKeys are the agent's sealing keys (agent/sealkey), which open
	// the sealed downstreamResources.
	SealingKeys func() []*ecdh.PrivateKey
	// Local is the agent's own cluster, where the downstreamResources are
	// created; without it they are not.
	Local client.Client
	// Downstream installs, upgrades and uninstalls releases in the agent's
	// own cluster, reads their records and corrects drift.
	Downstream Downstream
	// Watcher watches the deployed objects; a change of one brings its
	// BundleDeployment back at once (drift).
	Watcher *monitor.Watcher
	// Workers is the number of BundleDeployments reconciled at once.
	Workers int
	// Resync is how often every BundleDeployment is checked again without an
	// event, and releases of deleted BundleDeployments are looked for.
	Resync time.Duration
	// GarbageCollectionInterval, when set, is how often releases of deleted
	// BundleDeployments are looked for instead (the agent ConfigMap's
	// garbageCollectionInterval, Fleet's setting).
	GarbageCollectionInterval time.Duration
	// MinBackoff and MaxBackoff bound retries after transient errors.
	MinBackoff, MaxBackoff time.Duration

	events   chan event.GenericEvent
	releases sync.Map // release key -> BundleDeployment name
	state    sync.Map // BundleDeployment name -> *releaseState
	bounds   sync.Map // BundleDeployment name -> *boundHit
	contents contentCache
	copies   sync.Map // BundleDeployment name -> sealed data last applied ("" none)
	gcMu     sync.Mutex
}

// releaseState is what the reconciler knows of a BundleDeployment's release,
// so that an unchanged BundleDeployment costs no Helm storage reads.
type releaseState struct {
	key release.Key
	// last is the latest revision, deployed the latest deployed one.
	last, deployed *release.Release
	// desired are the objects of deployed's manifest.
	desired []*unstructured.Unstructured
}

// SetupWithManager registers the reconciler, the Watcher and the resync loop.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	if r.Workers <= 0 {
		r.Workers = DefaultWorkers
	}
	if r.Resync <= 0 {
		r.Resync = DefaultResync
	}
	if r.MinBackoff <= 0 {
		r.MinBackoff = 200 * time.Millisecond
	}
	if r.MaxBackoff <= 0 {
		r.MaxBackoff = DefaultMaxBackoff
	}
	r.events = make(chan event.GenericEvent, 4096)
	r.Watcher.OnChange = r.releaseChanged
	if err := mgr.Add(r.Watcher); err != nil {
		return err
	}
	if err := mgr.Add(manager.RunnableFunc(r.resyncLoop)); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		// Spec changes and deletions; the agent's own status writes do not
		// bring a BundleDeployment back.
		For(&fleet.BundleDeployment{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// Any change of a BundleDeployment may unblock those depending on it.
		Watches(&fleet.BundleDeployment{}, handler.EnqueueRequestsFromMapFunc(r.dependents)).
		// Changes of deployed objects downstream, and the resync.
		WatchesRawSource(source.Channel(r.events, &handler.EnqueueRequestForObject{})).
		Named("bundledeployment").
		WithOptions(controller.Options{
			MaxConcurrentReconciles: r.Workers,
			// The agent builds a new manager after a failure, in this process.
			SkipNameValidation: ptr.To(true),
			// The manager's API server may be down when the agent starts:
			// wait for it rather than give up.
			CacheSyncTimeout: 24 * time.Hour,
			RateLimiter:      workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](r.MinBackoff, r.MaxBackoff),
		}).
		Complete(r)
}

// enqueue asks for a BundleDeployment to be reconciled, without blocking the
// caller (an informer's handler).
func (r *Reconciler) enqueue(name string) {
	e := event.GenericEvent{Object: &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: r.ClusterNamespace, Name: name}}}
	select {
	case r.events <- e:
	default:
		go func() { r.events <- e }()
	}
}

// releaseChanged maps a changed downstream object to its BundleDeployment.
func (r *Reconciler) releaseChanged(namespace, name string) {
	if bd, ok := r.releases.Load(release.Key{Namespace: namespace, Name: name}.String()); ok {
		r.enqueue(bd.(string))
	}
}

// resyncLoop collects garbage once the cache has synced, then, every
// Resync, reconciles every BundleDeployment and collects garbage again.
func (r *Reconciler) resyncLoop(ctx context.Context) error {
	log := ctrl.LoggerFrom(ctx).WithName("resync")
	if !r.Cache.WaitForCacheSync(ctx) {
		return nil
	}
	t := time.NewTicker(r.Resync)
	defer t.Stop()
	gcEvery := r.GarbageCollectionInterval
	if gcEvery <= 0 {
		gcEvery = r.Resync
	}
	gc := time.NewTicker(gcEvery)
	defer gc.Stop()
	collect := func() {
		if err := r.collectGarbage(ctx); err != nil {
			log.Info("Could not remove releases of deleted BundleDeployments, retrying at the next collection", "reason", err.Error())
		}
	}
	collect()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-gc.C:
			collect()
			continue
		case <-t.C:
		}
		list := &fleet.BundleDeploymentList{}
		if err := r.Upstream.List(ctx, list, client.InNamespace(r.ClusterNamespace)); err != nil {
			log.Info("Could not list BundleDeployments, retrying at the next resync", "reason", err.Error())
			continue
		}
		for _, bd := range list.Items {
			r.enqueue(bd.Name)
		}
	}
}

// scope is what one reconcile's phases share.
type scope struct {
	bd     *fleet.BundleDeployment
	before *fleet.BundleDeployment
	key    release.Key
	state  *releaseState
	// waiting lists the unmet dependencies.
	waiting []string
	// resources are the files to deploy, SOPS files opened; loaded tells
	// that they were read (a deploy is due).
	resources []fleet.BundleResource
	loaded    bool
	// deployed tells that this reconcile deployed a new revision.
	deployed bool
	// deployErr is the error of this reconcile's deploy.
	deployErr error
	// copiesChanged tells that this reconcile updated a copy of the
	// downstreamResources: the release is deployed again.
	copiesChanged bool
	// monitored is the state of the deployed objects; monitorErr why it is
	// unknown.
	monitored  *monitor.Result
	monitorErr error
}

// Reconcile deploys one BundleDeployment and reports its status: get it;
// when it is gone, remove its release (the agent holds no finalizer); else
// run the phases and, deferred, compute the status fields the agent owns and
// patch them once. A Stalling error (the bundle's author must change
// something) stops until the BundleDeployment changes or the resync looks
// again; other errors back off.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (res ctrl.Result, reterr error) {
	bd := &fleet.BundleDeployment{}
	if err := r.Upstream.Get(ctx, req.NamespacedName, bd); err != nil {
		if apierrors.IsNotFound(err) {
			r.bounds.Delete(req.Name)
			return ctrl.Result{}, r.collectGarbage(ctx)
		}
		return ctrl.Result{}, err
	}
	if !bd.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.collectGarbage(ctx)
	}
	s := &scope{bd: bd, before: bd.DeepCopy(), key: release.For(bd.Name, bd.Spec.Options)}
	var err error
	defer func() {
		computeStatus(s, err)
		perr := r.writeStatus(ctx, s)
		switch {
		case apierrors.IsConflict(perr):
			// The status was computed from an object the cache had not
			// caught up with: read it again soon, without logging an error.
			res, reterr = ctrl.Result{RequeueAfter: time.Second}, nil
		case perr != nil && reterr == nil:
			reterr = perr
		}
	}()
	err = r.reconcilePhases(ctx, s)
	return outcome.Result(err, 0)
}

// reconcilePhases runs the phases in order; the first error ends the
// reconcile.
func (r *Reconciler) reconcilePhases(ctx context.Context, s *scope) error {
	for _, phase := range []func(context.Context, *scope) error{
		r.loadState, r.checkDependencies, r.loadContent, r.applyDownstreamResources, r.deploy, r.monitor, r.correctDrift,
	} {
		if err := phase(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

// writeStatus writes the status when this reconcile changed it. The agent
// is the only writer of a BundleDeployment's status, but its cache may be
// behind its own last write: the write carries the resourceVersion the
// status was computed from, and a stale one is refused with a conflict.
func (r *Reconciler) writeStatus(ctx context.Context, s *scope) error {
	if equality.Semantic.DeepEqual(s.before.Status, s.bd.Status) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	obj, err := StatusOnly(s.bd)
	if err != nil {
		return fmt.Errorf("writing the status of BundleDeployment %s: %w", s.bd.Name, err)
	}
	if err := r.Upstream.Status().Update(ctx, obj); err != nil {
		return client.IgnoreNotFound(fmt.Errorf("writing the status of BundleDeployment %s: %w", s.bd.Name, err))
	}
	return nil
}

// StatusOnly is the body of a status write of bd: its name, the
// resourceVersion its status was computed from, and the whole status.
//
// It is an update of the status subresource, not a patch: the API server
// takes only the status from it and keeps everything else of the stored
// object, so the spec (Helm values can be large) need not be sent, and it
// decodes the body once instead of encoding the stored object, applying a
// patch and decoding the result (about 40% of the cost of a status patch
// of a BundleDeployment on the API server). Every count of
// status.resourceCounts is written, zeros included, as Fleet's readers
// expect.
func StatusOnly(bd *fleet.BundleDeployment) (*unstructured.Unstructured, error) {
	data, err := json.Marshal(bd.Status)
	if err != nil {
		return nil, err
	}
	var status map[string]any
	if err := json.Unmarshal(data, &status); err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: map[string]any{"status": status}}
	u.SetGroupVersionKind(fleet.GroupVersion.WithKind("BundleDeployment"))
	u.SetNamespace(bd.Namespace)
	u.SetName(bd.Name)
	u.SetUID(bd.UID)
	u.SetResourceVersion(bd.ResourceVersion)
	return u, nil
}
