package bundle

import (
	"context"
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
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/cacheindex"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/internal/target"
)

// The phases of a full pass, in order: compile, reconcileContent (content.go),
// listExisting, computeTargets, writeDeployments.

// compile compiles the bundle's target selectors, once per generation.
func (r *Reconciler) compile(_ context.Context, s *scope) error {
	if c, ok := r.mem.compiledBundle(s.bundle); ok {
		s.compiled = c
		return nil
	}
	c, err := target.Compile(s.bundle)
	if err != nil {
		return outcome.Stallf(fleet.ReasonInvalidTargets, "invalid targets: %w (fix the targets in fleet.yaml or the GitRepo)", err)
	}
	r.mem.storeCompiled(s.bundle, c)
	s.compiled = c
	return nil
}

// listExisting reads the bundle's BundleDeployments from the cache, plus
// those a pass created that the cache does not show yet.
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
	r.mem.fill(s.bundle.UID, s.existing, time.Now())
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
		groups, err := r.compiledGroups(ctx, ns, true)
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
				cluster: cluster, info: info, namespace: names.ClusterNamespaceFor(cluster.Namespace, cluster.Name, cluster.Status.Namespace), id: id, options: opts,
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

// isTemplated tells whether the Helm values differ from cluster to cluster.
func isTemplated(opts *fleet.BundleDeploymentOptions) bool {
	return target.DependsOnCluster(opts.Helm)
}

func templateValues(opts *fleet.BundleDeploymentOptions, cluster *fleet.Cluster) error {
	values, err := target.RenderHelmValues(opts.Helm, target.TemplateContextFor(cluster))
	if err != nil {
		return err
	}
	opts.Helm.Values = nil
	if values != nil {
		opts.Helm.Values = &fleet.GenericMap{Data: values}
	}
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
			return nil, outcome.Stallf(fleet.ReasonInvalidSelector, "fix BundleNamespaceMapping %s: %w", mappings.Items[i].Name, err)
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

// compiledGroups are the ClusterGroups of namespace ns, compiled. keep
// stores what had to be compiled in the controller's memory; a mapper passes
// false, since it only maps.
func (r *Reconciler) compiledGroups(ctx context.Context, ns string, keep bool) ([]*target.CompiledGroup, error) {
	list := &fleet.ClusterGroupList{}
	if err := r.Client.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
		return nil, err
	}
	out := make([]*target.CompiledGroup, 0, len(list.Items))
	for i := range list.Items {
		g := &list.Items[i]
		if c, ok := r.mem.compiledGroup(g); ok {
			out = append(out, c)
			continue
		}
		c, err := target.CompileGroup(g)
		if err != nil {
			// A broken group targets nothing; its own controller reports it.
			continue
		}
		if keep {
			r.mem.storeGroup(g, c)
		}
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
					r.mem.created(s.bundle.UID, desired, time.Now())
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
		return outcome.Stall(fleet.ReasonInvalidTargets, err)
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

// desired is the BundleDeployment the pass writes for t.
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

// runParallel runs fns, at most WriteParallelism at once, and joins their
// errors.
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
