package bundle

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/cacheindex"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/internal/target"
)

// Reconciler targets Bundles at Clusters.
type Reconciler struct {
	Client client.Client
	// Workers is the number of Bundles reconciled at once.
	Workers int
	// WriteParallelism bounds the concurrent BundleDeployment writes of one
	// reconcile.
	WriteParallelism int

	compiled sync.Map // types.UID -> *target.CompiledBundle
	groups   sync.Map // types.UID -> *target.CompiledGroup
	expected expectations
	// The cache's own objects, read in place (see cacheindex).
	deployments toolscache.Indexer // BundleDeployments, with fleet.BundleIndex
	clusters    toolscache.Indexer // Clusters
	passes      sync.Map           // types.UID -> *pass, the last full pass of a bundle
	retarget    sync.Map           // types.NamespacedName -> struct{}: a full pass is due
}

// BundleKey is the fleet.BundleIndex value of a BundleDeployment.
func BundleKey(bd client.Object) string {
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
	var err error
	if r.deployments, err = cacheindex.For(ctx, mgr.GetCache(), &fleet.BundleDeployment{}, toolscache.Indexers{fleet.BundleIndex: func(obj any) ([]string, error) {
		if o, ok := obj.(client.Object); ok {
			if k := BundleKey(o); k != "" {
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
	clusterChanged := predicate.Or(predicate.GenerationChangedPredicate{}, predicate.LabelChangedPredicate{})
	return ctrl.NewControllerManagedBy(mgr).
		For(&fleet.Bundle{}).
		// Status changes of many deployments coalesce into one pass.
		Watches(&fleet.BundleDeployment{}, r.deploymentEvents()).
		Watches(&fleet.Cluster{}, handler.EnqueueRequestsFromMapFunc(r.retargeting(r.bundlesForCluster)), builder.WithPredicates(clusterChanged)).
		Watches(&fleet.ClusterGroup{}, handler.EnqueueRequestsFromMapFunc(r.retargeting(r.bundlesInNamespace)), builder.WithPredicates(clusterChanged)).
		Watches(&fleet.BundleNamespaceMapping{}, handler.EnqueueRequestsFromMapFunc(r.retargeting(r.bundlesInNamespace))).
		Named("bundle").
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)}).
		Complete(r)
}

// scope is what one reconcile's phases share.
type scope struct {
	bundle      *fleet.Bundle
	compiled    *target.CompiledBundle
	contentName string
	existing    map[string]*fleet.BundleDeployment // by cluster namespace
	targets     []clusterTarget
	plan        *Plan
	errs        []error
	// createOnly: a later batch of the same pass, which only creates what
	// maxNew held back.
	createOnly bool
}

type clusterTarget struct {
	cluster   *fleet.Cluster
	info      *target.ClusterInfo
	namespace string
	id        string
	options   *fleet.BundleDeploymentOptions
}

// Reconcile targets one Bundle.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, reterr error) {
	bundle := &fleet.Bundle{}
	if err := r.Client.Get(ctx, req.NamespacedName, bundle); err != nil {
		if apierrors.IsNotFound(err) {
			r.retarget.Delete(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
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
		r.computeStatus(s, reterr)
		if !equality.Semantic.DeepEqual(before.Status, bundle.Status) {
			patch := client.MergeFrom(before)
			if err := r.Client.Status().Patch(ctx, bundle, patch); err != nil && reterr == nil {
				reterr = client.IgnoreNotFound(err)
			}
		}
	}()

	if _, due := r.retarget.LoadAndDelete(req.NamespacedName); !due {
		if done, err := r.statusPass(ctx, s, time.Now()); done || err != nil {
			return ctrl.Result{}, err
		}
	}
	for _, phase := range []func(context.Context, *scope) error{
		r.compile, r.reconcileContent, r.listExisting, r.computeTargets, r.writeDeployments,
	} {
		if err := phase(ctx, s); err != nil {
			r.passes.Delete(bundle.UID)
			return ctrl.Result{}, err
		}
	}
	r.remember(s, time.Now())
	// maxNew held creations back. The next passes create more on the same
	// targets: matching thousands of clusters again for every 50 creations
	// was most of the manager's CPU at 5000 clusters. A reconcile stops after
	// a while so that a change of the bundle is not kept waiting.
	for deadline := time.Now().Add(batchBudget); s.plan.More && time.Now().Before(deadline); {
		r.expected.addTo(s.bundle.UID, s.existing)
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

func (r *Reconciler) compile(_ context.Context, s *scope) error {
	if c, ok := r.compiled.Load(s.bundle.UID); ok && c.(*target.CompiledBundle).UpToDate(s.bundle) {
		s.compiled = c.(*target.CompiledBundle)
		return nil
	}
	c, err := target.Compile(s.bundle)
	if err != nil {
		return reconcile.TerminalError(fmt.Errorf("invalid targets: %w", err))
	}
	r.compiled.Store(s.bundle.UID, c)
	s.compiled = c
	return nil
}

func (r *Reconciler) listExisting(_ context.Context, s *scope) error {
	// The cache's own objects: a pass copies only what it writes.
	bds, err := cacheindex.Objects[fleet.BundleDeployment](r.deployments, fleet.BundleIndex, s.bundle.Namespace+"/"+s.bundle.Name)
	if err != nil {
		return err
	}
	s.existing = make(map[string]*fleet.BundleDeployment, len(bds))
	for _, bd := range bds {
		s.existing[bd.Namespace] = bd
	}
	r.expected.fill(s.bundle.UID, s.existing, time.Now())
	return nil
}

// computeTargets matches every cluster the bundle may target and works out
// its options and deploymentID.
func (r *Reconciler) computeTargets(ctx context.Context, s *scope) error {
	namespaces, err := r.clusterNamespaces(ctx, s.bundle)
	if err != nil {
		return err
	}
	// Clusters matching the same targets share one Result; unless their Helm
	// values are templated per cluster, they share options and deploymentID.
	shared := map[*target.Result]sharedOptions{}
	for _, ns := range namespaces {
		clusters, err := cacheindex.Objects[fleet.Cluster](r.clusters, toolscache.NamespaceIndex, ns)
		if err != nil {
			return err
		}
		groups, err := r.compiledGroups(ctx, ns)
		if err != nil {
			return err
		}
		for _, cluster := range clusters {
			if !cluster.DeletionTimestamp.IsZero() {
				continue
			}
			info := target.ClusterInfoFor(cluster, groups)
			res, ok := s.compiled.Match(info)
			if !ok {
				continue
			}
			opts, id, err := r.optionsFor(s, res, cluster, shared)
			if err != nil {
				s.errs = append(s.errs, fmt.Errorf("cluster %s/%s: %w", cluster.Namespace, cluster.Name, err))
				continue
			}
			s.targets = append(s.targets, clusterTarget{
				cluster: cluster, info: info, namespace: names.ClusterNamespace(cluster.Namespace, cluster.Name), id: id, options: opts,
			})
		}
	}
	sort.Slice(s.targets, func(i, j int) bool { return s.targets[i].namespace < s.targets[j].namespace })
	return nil
}

type sharedOptions struct {
	options *fleet.BundleDeploymentOptions
	id      string
}

// optionsFor returns a cluster's options and deploymentID, computed once per
// match result when nothing in them depends on the cluster.
func (r *Reconciler) optionsFor(s *scope, res *target.Result, cluster *fleet.Cluster, shared map[*target.Result]sharedOptions) (*fleet.BundleDeploymentOptions, string, error) {
	if so, ok := shared[res]; ok {
		return so.options, so.id, nil
	}
	opts := res.Options.DeepCopy()
	templated := isTemplated(opts)
	if templated {
		if err := templateValues(opts, cluster); err != nil {
			return opts, "", err
		}
	}
	id, err := target.DeploymentID(s.contentName, *opts)
	if err != nil {
		return opts, "", err
	}
	if !templated {
		shared[res] = sharedOptions{options: opts, id: id}
	}
	return opts, id, nil
}

// isTemplated tells whether Helm values hold ${ } templates to render per
// cluster.
func isTemplated(opts *fleet.BundleDeploymentOptions) bool {
	if opts.Helm == nil || opts.Helm.Values == nil || opts.Helm.DisablePreProcess || len(opts.Helm.Values.Data) == 0 {
		return false
	}
	raw, err := json.Marshal(opts.Helm.Values.Data)
	return err != nil || bytes.Contains(raw, []byte("${"))
}

func templateValues(opts *fleet.BundleDeploymentOptions, cluster *fleet.Cluster) error {
	values, err := target.ProcessTemplateValues(opts.Helm.Values.Data, target.TemplateContextFor(cluster))
	if err != nil {
		return err
	}
	opts.Helm.Values = &fleet.GenericMap{Data: values}
	return nil
}

// clusterNamespaces are the bundle's namespace plus those mapped to it.
func (r *Reconciler) clusterNamespaces(ctx context.Context, b *fleet.Bundle) ([]string, error) {
	mappings := &fleet.BundleNamespaceMappingList{}
	if err := r.Client.List(ctx, mappings, client.InNamespace(b.Namespace)); err != nil {
		return nil, err
	}
	if len(mappings.Items) == 0 {
		return []string{b.Namespace}, nil
	}
	compiled := make([]*target.CompiledMapping, 0, len(mappings.Items))
	for i := range mappings.Items {
		m, err := target.CompileMapping(&mappings.Items[i])
		if err != nil {
			return nil, reconcile.TerminalError(fmt.Errorf("BundleNamespaceMapping %s: %w", mappings.Items[i].Name, err))
		}
		compiled = append(compiled, m)
	}
	nsList := &corev1.NamespaceList{}
	if err := r.Client.List(ctx, nsList); err != nil {
		return nil, err
	}
	labels := make(map[string]map[string]string, len(nsList.Items))
	for _, ns := range nsList.Items {
		labels[ns.Name] = ns.Labels
	}
	return target.AllowedNamespaces(compiled, b.Namespace, b.Labels, labels), nil
}

func (r *Reconciler) compiledGroups(ctx context.Context, ns string) ([]*target.CompiledGroup, error) {
	list := &fleet.ClusterGroupList{}
	if err := r.Client.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]*target.CompiledGroup, 0, len(list.Items))
	for i := range list.Items {
		g := &list.Items[i]
		if c, ok := r.groups.Load(g.UID); ok && c.(*target.CompiledGroup).ResourceVersion == g.ResourceVersion {
			out = append(out, c.(*target.CompiledGroup))
			continue
		}
		c, err := target.CompileGroup(g)
		if err != nil {
			// A broken group targets nothing; its own controller reports it.
			continue
		}
		r.groups.Store(g.UID, c)
		out = append(out, c)
	}
	return out, nil
}

// writeDeployments creates, updates and deletes BundleDeployments so that
// exactly the targeted clusters have one, as the rollout plan allows.
func (r *Reconciler) writeDeployments(ctx context.Context, s *scope) error {
	if err := r.planRollout(s); err != nil {
		return err
	}
	plan := s.plan

	var writes []func() error
	wanted := make(map[string]bool, len(s.targets))
	for i, t := range s.targets {
		wanted[t.namespace] = true
		existing := s.existing[t.namespace]
		switch {
		case existing == nil && !plan.Create[i]:
			// Held back by maxNew; a later pass creates it.
		case existing == nil:
			desired := r.desired(s, t)
			writes = append(writes, func() error {
				err := r.Client.Create(ctx, desired)
				// AlreadyExists: made by another writer and not in the cache
				// yet; its event brings this bundle back with a fresher view.
				if err == nil || apierrors.IsAlreadyExists(err) {
					r.expected.created(s.bundle.UID, desired, time.Now())
					return nil
				}
				return err
			})
		case s.createOnly, unchanged(s, t, existing, plan.Deploy[i]):
		default:
			desired := r.desired(s, t)
			if !plan.Deploy[i] {
				// Stage only: the cluster keeps what it runs.
				desired.Spec.DeploymentID, desired.Spec.Options = existing.Spec.DeploymentID, *existing.Spec.Options.DeepCopy()
			}
			// A merge patch of spec and labels: the agent patches status all the
			// time, and an update would conflict with it.
			before := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: existing.Name, Namespace: existing.Namespace, Labels: existing.Labels}, Spec: existing.Spec}
			after := before.DeepCopy()
			after.Spec, after.Labels = desired.Spec, desired.Labels
			writes = append(writes, func() error { return client.IgnoreNotFound(r.Client.Patch(ctx, after, client.MergeFrom(before))) })
		}
	}
	for ns, bd := range s.existing {
		if !wanted[ns] && !s.createOnly {
			bd := bd.DeepCopy()
			writes = append(writes, func() error { return client.IgnoreNotFound(r.Client.Delete(ctx, bd)) })
		}
	}
	return r.runParallel(writes)
}

// planRollout plans which targets are created and moved in this pass.
func (r *Reconciler) planRollout(s *scope) error {
	cands := make([]Candidate, len(s.targets))
	for i, t := range s.targets {
		c := Candidate{Info: t.info, State: fleet.Pending}
		if bd := s.existing[t.namespace]; bd != nil {
			c.Exists, c.UpToDate, c.State = true, bd.Spec.DeploymentID == t.id, summary.State(bd)
		}
		cands[i] = c
	}
	plan, err := PlanRollout(cands, s.bundle.Spec.RolloutStrategy, s.bundle.Spec.Paused)
	if err != nil {
		return reconcile.TerminalError(err)
	}
	s.plan = &plan
	return nil
}

// ownLabels are the labels every BundleDeployment of a pass carries; the
// bundle's own labels are added where they do not collide.
func ownLabels(s *scope, t clusterTarget) [6][2]string {
	return [...][2]string{
		{fleet.ManagedLabel, "true"},
		{fleet.BundleNameLabel, s.bundle.Name},
		{fleet.BundleNamespaceLabel, s.bundle.Namespace},
		{fleet.ClusterLabel, t.cluster.Name},
		{fleet.ClusterNamespaceLabel, t.cluster.Namespace},
		{fleet.ContentNameLabel, s.contentName},
	}
}

// unchanged tells whether existing already is what the pass would write for
// t, looked at in place: building every desired BundleDeployment on every
// pass was most of a pass's allocations at thousands of clusters.
func unchanged(s *scope, t clusterTarget, existing *fleet.BundleDeployment, deploy bool) bool {
	spec, b := &existing.Spec, s.bundle
	if spec.StagedDeploymentID != t.id || (deploy && spec.DeploymentID != t.id) ||
		spec.Paused != (b.Spec.Paused || t.cluster.Spec.Paused) ||
		!equality.Semantic.DeepEqual(&spec.StagedOptions, t.options) ||
		(deploy && !equality.Semantic.DeepEqual(&spec.Options, t.options)) ||
		!equality.Semantic.DeepEqual(spec.DependsOn, b.Spec.DependsOn) ||
		!equality.Semantic.DeepEqual(spec.CorrectDrift, t.options.CorrectDrift) {
		return false
	}
	own := ownLabels(s, t)
	want := len(own)
	for _, kv := range own {
		if v, ok := existing.Labels[kv[0]]; !ok || v != kv[1] {
			return false
		}
	}
	for k, v := range b.Labels {
		if slices.ContainsFunc(own[:], func(kv [2]string) bool { return kv[0] == k }) {
			continue
		}
		if have, ok := existing.Labels[k]; !ok || have != v {
			return false
		}
		want++
	}
	return len(existing.Labels) == want
}

func (r *Reconciler) desired(s *scope, t clusterTarget) *fleet.BundleDeployment {
	b := s.bundle
	own := ownLabels(s, t)
	labels := make(map[string]string, len(own)+len(b.Labels))
	for _, kv := range own {
		labels[kv[0]] = kv[1]
	}
	bd := &fleet.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: b.Name, Namespace: t.namespace, Labels: labels},
		Spec: fleet.BundleDeploymentSpec{
			StagedDeploymentID: t.id,
			StagedOptions:      *t.options,
			DeploymentID:       t.id,
			Options:            *t.options,
			Paused:             b.Spec.Paused || t.cluster.Spec.Paused,
			DependsOn:          b.Spec.DependsOn,
			CorrectDrift:       t.options.CorrectDrift,
		},
	}
	for k, v := range b.Labels {
		if _, taken := bd.Labels[k]; !taken {
			bd.Labels[k] = v
		}
	}
	return bd
}

func (r *Reconciler) runParallel(fns []func() error) error {
	if len(fns) == 0 {
		return nil
	}
	sem := make(chan struct{}, r.WriteParallelism)
	errs := make([]error, len(fns))
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = fn()
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

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
		gone := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: bd.Name, Namespace: bd.Namespace}}
		fns = append(fns, func() error { return client.IgnoreNotFound(r.Client.Delete(ctx, gone)) })
	}
	if err := r.runParallel(fns); err != nil {
		return err
	}
	r.compiled.Delete(b.UID)
	r.passes.Delete(b.UID)
	r.expected.forget(b.UID)
	controllerutil.RemoveFinalizer(b, fleet.BundleFinalizer)
	return client.IgnoreNotFound(r.Client.Update(ctx, b))
}

// bundlesForCluster enqueues the bundles that target the cluster now or
// have a BundleDeployment for it from before.
func (r *Reconciler) bundlesForCluster(ctx context.Context, o client.Object) []reconcile.Request {
	cluster := o.(*fleet.Cluster)
	seen := map[types.NamespacedName]bool{}
	bds := &fleet.BundleDeploymentList{}
	if err := r.Client.List(ctx, bds, client.InNamespace(names.ClusterNamespace(cluster.Namespace, cluster.Name)), client.UnsafeDisableDeepCopy); err == nil {
		for _, bd := range bds.Items {
			l := bd.Labels
			seen[types.NamespacedName{Namespace: l[fleet.BundleNamespaceLabel], Name: l[fleet.BundleNameLabel]}] = true
		}
	}
	groups, _ := r.compiledGroups(ctx, cluster.Namespace)
	info := target.ClusterInfoFor(cluster, groups)
	bundles := &fleet.BundleList{}
	// Bundles in other namespaces reach this cluster only through mappings;
	// those are rare, so they are looked at only where a mapping exists.
	if err := r.Client.List(ctx, bundles, client.UnsafeDisableDeepCopy); err == nil {
		for i := range bundles.Items {
			b := &bundles.Items[i]
			key := types.NamespacedName{Namespace: b.Namespace, Name: b.Name}
			if seen[key] || (b.Namespace != cluster.Namespace && !r.hasMappings(ctx, b.Namespace)) {
				continue
			}
			c, ok := r.compiled.Load(b.UID)
			if !ok || !c.(*target.CompiledBundle).UpToDate(b) {
				seen[key] = true
				continue
			}
			if _, match := c.(*target.CompiledBundle).Match(info); match {
				seen[key] = true
			}
		}
	}
	reqs := make([]reconcile.Request, 0, len(seen))
	for k := range seen {
		if k.Name != "" {
			reqs = append(reqs, reconcile.Request{NamespacedName: k})
		}
	}
	return reqs
}

func (r *Reconciler) hasMappings(ctx context.Context, ns string) bool {
	list := &fleet.BundleNamespaceMappingList{}
	return r.Client.List(ctx, list, client.InNamespace(ns), client.Limit(1)) == nil && len(list.Items) > 0
}

func (r *Reconciler) bundlesInNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	bundles := &fleet.BundleList{}
	if err := r.Client.List(ctx, bundles, client.InNamespace(o.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil {
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(bundles.Items))
	for _, b := range bundles.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: b.Namespace, Name: b.Name}})
	}
	return reqs
}
