package bundle

import (
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/cacheindex"
	"github.com/gitfleet/fleet/internal/ocistorage"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/secretmeta"
	"github.com/gitfleet/fleet/internal/sharding"
	"github.com/gitfleet/fleet/internal/target"
)

// Reconciler targets Bundles at Clusters.
type Reconciler struct {
	Client client.Client
	// Recorder records an event when a Bundle's Ready condition turns to a
	// new failure or recovers; default mgr.GetEventRecorder("fleet-bundle").
	Recorder events.EventRecorder
	// Workers is the number of Bundles reconciled at once.
	Workers int
	// WriteParallelism bounds the concurrent BundleDeployment writes of one
	// reconcile.
	WriteParallelism int
	// Shard is the shard this manager serves: it handles only the Bundles
	// labelled fleet.cattle.io/shard-ref with it, or, when empty, those
	// without the label (internal/sharding). Their BundleDeployments carry
	// the Bundle's labels, the shard's too.
	Shard string
	// APIReader reads OCI storage Secrets, which the cache does not hold;
	// default mgr.GetAPIReader().
	APIReader client.Reader
	// OCIStorageSecret is the manager-wide OCI storage Secret: Bundles may
	// name it (fleet.OCIStorageSecretAnnotation) besides Secrets of their
	// own namespace.
	OCIStorageSecret types.NamespacedName
	// Secrets is the manager's metadata watch of Secrets: a change of the
	// Secret a bundle's agent Secrets come from rewrites them. Nil: they
	// follow at the bundle's next full pass.
	Secrets *secretmeta.Watch

	// ociSecrets remembers the agent Secrets written next to the
	// BundleDeployments of bundles in OCI storage (see ensureOCISecret).
	ociSecrets sync.Map
	// lastStatus is when each bundle's status was last written
	// (types.NamespacedName -> time.Time), for holdStatus.
	lastStatus sync.Map
	// mem is what the controller keeps between reconciles (see memory).
	mem memory
	// The cache's own objects, read in place (see cacheindex).
	deployments toolscache.Indexer // BundleDeployments, with fleet.BundleIndex
	clusters    toolscache.Indexer // Clusters
}

// IndexKey is the fleet.BundleIndex value of a BundleDeployment.
func IndexKey(bd client.Object) string {
	if b, ok := bundleOf(bd); ok {
		return b.String()
	}
	return ""
}

// bundleOf is the Bundle a BundleDeployment belongs to, from its labels.
func bundleOf(bd client.Object) (types.NamespacedName, bool) {
	l := bd.GetLabels()
	return types.NamespacedName{Namespace: l[fleet.BundleNamespaceLabel], Name: l[fleet.BundleNameLabel]}, l[fleet.BundleNameLabel] != ""
}

// SetupWithManager registers the controller, its index and its watches.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	if r.WriteParallelism == 0 {
		r.WriteParallelism = 16
	}
	if r.Recorder == nil {
		r.Recorder = mgr.GetEventRecorder("fleet-bundle")
	}
	if r.APIReader == nil {
		r.APIReader = mgr.GetAPIReader()
	}
	var err error
	if r.deployments, err = cacheindex.For(ctx, mgr.GetCache(), &fleet.BundleDeployment{}, toolscache.Indexers{fleet.BundleIndex: func(obj any) ([]string, error) {
		if o, ok := obj.(client.Object); ok {
			if k := IndexKey(o); k != "" {
				return []string{k}, nil
			}
		}
		return nil, nil
	}}); err != nil {
		return err
	}
	if r.clusters, err = cacheindex.For(ctx, mgr.GetCache(), &fleet.Cluster{}, nil); err != nil {
		return err
	}
	// Heartbeats and other status-only changes of a Cluster never re-target.
	groupChanged := predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{})
	// A Cluster's deployment window opening or closing is in its status.
	clusterChanged := predicate.Or(groupChanged, windowChanged)
	if err := mgr.GetFieldIndexer().IndexField(ctx, &fleet.Bundle{}, agentSecretIndex, indexAgentSecretSource); err != nil {
		return err
	}
	b := ctrl.NewControllerManagedBy(mgr).
		For(&fleet.Bundle{}, builder.WithPredicates(sharding.Predicate(r.Shard))).
		// Status changes of many deployments coalesce into one pass.
		Watches(&fleet.BundleDeployment{}, r.deploymentEvents(), builder.WithPredicates(sharding.Predicate(r.Shard))).
		Watches(&fleet.Cluster{}, r.retargetOn(r.bundlesForCluster, nil), builder.WithPredicates(clusterChanged)).
		Watches(&fleet.ClusterGroup{}, r.retargetOn(r.bundlesInNamespace, r.mem.forgetGroup), builder.WithPredicates(groupChanged)).
		Watches(&fleet.BundleNamespaceMapping{}, r.retargetOn(r.bundlesInNamespace, nil)).
		Watches(&fleet.Policy{}, r.retargetOn(r.bundlesInNamespace, nil))
	if r.Secrets != nil {
		b = b.WatchesRawSource(r.Secrets.Source(r.secretEvents()))
	}
	return b.Named("bundle").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Complete(r)
}

// scope is what one reconcile's phases share.
type scope struct {
	bundle      *fleet.Bundle
	compiled    *target.CompiledBundle
	contentName string
	// oci is the registry of a bundle in OCI storage, nil for a Content.
	oci *ocistorage.Options
	// agentSecret, for a bundle in OCI storage or a HelmOp's bundle with a
	// helmOpOptions.secretName, is the Secret next to a BundleDeployment
	// that its agent reads; nil for none.
	agentSecret func(*fleet.BundleDeployment) *corev1.Secret
	existing    map[string]*fleet.BundleDeployment // by cluster namespace
	targets     []target.Deployment
	plan        *Plan
	// errs are the clusters whose options could not be worked out (a Helm
	// values template that fails for them): the others are still targeted.
	errs []error
	// createOnly: a later batch of the same pass, which only creates what
	// maxNew held back.
	createOnly bool
	// createNamespace is the Policies' say on creating the release
	// namespace (false when they require a service account), nil for none.
	createNamespace *bool
}

// Reconcile targets one Bundle: a status pass when nothing targeting reads
// changed, otherwise a full pass (compile, content, existing deployments,
// targets, writes); then one status computation and one patch.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (result ctrl.Result, reterr error) {
	bundle := &fleet.Bundle{}
	if err := r.Client.Get(ctx, req.NamespacedName, bundle); err != nil {
		if apierrors.IsNotFound(err) {
			r.mem.forgetKey(req.NamespacedName)
			r.lastStatus.Delete(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// Clusters and groups map to the Bundles of every shard: another
	// shard's are its manager's.
	if !sharding.Owns(r.Shard, bundle) {
		r.mem.forgetKey(req.NamespacedName)
		r.mem.forget(bundle.UID)
		r.lastStatus.Delete(req.NamespacedName)
		return ctrl.Result{}, nil
	}
	if !bundle.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.reconcileDelete(ctx, bundle)
	}
	if controllerutil.AddFinalizer(bundle, fleet.BundleFinalizer) {
		if err := r.Client.Update(ctx, bundle); err != nil {
			return ctrl.Result{}, err
		}
	}
	s := &scope{bundle: bundle}
	before := bundle.DeepCopy()
	defer func() {
		// The status sums what the reconcile saw; on success Ready sums the
		// deployments (setStatus), on failure it says what failed, with an
		// event when that is news. A lost status write is retried, whatever
		// the reconcile's outcome.
		setStatus(bundle, statusView(s), reterr)
		now := time.Now()
		if wait := holdStatus(&before.Status, &bundle.Status, r.lastStatusWrite(req.NamespacedName), now); wait > 0 && reterr == nil {
			// Counts during a rollout: written with the next ones, or
			// when it lands; the pass after wait writes them.
			bundle.Status = before.Status
			if result.RequeueAfter == 0 || wait < result.RequeueAfter {
				result.RequeueAfter = wait
			}
		} else if !equality.Semantic.DeepEqual(before.Status, bundle.Status) {
			r.statusWritten(req.NamespacedName, now)
		}
		in := outcome.Input{Object: bundle, Err: reterr, Recorder: r.Recorder, Action: "Target", FallbackReason: fleet.ReasonError,
			After: result.RequeueAfter} // maxNew held creations back, or counts held
		if reterr != nil {
			in.Condition = fleet.ConditionReady
		}
		result, reterr = outcome.Finish(ctx, r.Client, before, in)
	}()
	return r.reconcile(ctx, s, req.NamespacedName)
}

// reconcile runs the passes of one reconcile. A Result asks to come back
// soon when maxNew held creations back.
func (r *Reconciler) reconcile(ctx context.Context, s *scope, key types.NamespacedName) (ctrl.Result, error) {
	if !r.mem.takeRetarget(key) {
		if done, err := r.statusPass(ctx, s, time.Now()); done || err != nil {
			return ctrl.Result{}, err
		}
	}
	for _, phase := range []func(context.Context, *scope) error{
		r.authorize, r.compile, r.reconcileContent, r.listExisting, r.computeTargets, r.writeDeployments, r.writeOCISecrets,
	} {
		if err := phase(ctx, s); err != nil {
			r.mem.forgetPass(s.bundle.UID)
			return ctrl.Result{}, err
		}
	}
	r.remember(s, time.Now())
	// maxNew held creations back. The next passes create more on the same
	// targets: matching thousands of clusters again for every 50 creations
	// was most of the manager's CPU at 5000 clusters. A reconcile stops after
	// a while so that a change of the bundle is not kept waiting.
	for deadline := time.Now().Add(batchBudget); s.plan.More && time.Now().Before(deadline); {
		r.mem.addTo(s.bundle.UID, s.existing)
		s.createOnly = true
		if err := r.writeDeployments(ctx, s); err != nil {
			return ctrl.Result{}, err
		}
	}
	if s.plan.More {
		return ctrl.Result{RequeueAfter: time.Millisecond}, nil
	}
	return ctrl.Result{}, nil
}

// batchBudget is how long one reconcile keeps creating maxNew batches.
const batchBudget = 5 * time.Second

// reconcileDelete deletes the bundle's BundleDeployments, then lets it go.
func (r *Reconciler) reconcileDelete(ctx context.Context, b *fleet.Bundle) error {
	if !controllerutil.ContainsFinalizer(b, fleet.BundleFinalizer) {
		return nil
	}
	bds, err := cacheindex.Objects[fleet.BundleDeployment](r.deployments, fleet.BundleIndex, b.Namespace+"/"+b.Name)
	if err != nil {
		return err
	}
	fns := make([]func() error, 0, len(bds))
	for _, bd := range bds {
		gone := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: bd.Name, Namespace: bd.Namespace, UID: bd.UID}}
		fns = append(fns, func() error {
			if err := client.IgnoreNotFound(r.Client.Delete(ctx, gone)); err != nil {
				return err
			}
			return r.deleteHelmOpsSecret(ctx, gone)
		})
	}
	if err := r.runParallel(fns); err != nil {
		return err
	}
	r.mem.forget(b.UID)
	controllerutil.RemoveFinalizer(b, fleet.BundleFinalizer)
	return client.IgnoreNotFound(r.Client.Update(ctx, b))
}
