package bundle

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/cacheindex"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/restriction"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/internal/target"
)

// The phases of a full pass, in order: authorize, compile, reconcileContent
// (content.go), listExisting, computeTargets, writeDeployments.

// authorize checks the bundle against the Policies of its namespace, as
// Fleet's Bundle reconciler does, before any BundleDeployment is written:
// only a check, no default (a Bundle written directly, or a fleet.yaml
// target setting its own serviceAccount, gets no way around the GitRepo's
// and HelmOp's checks). A refusal is a Stalling error with
// fleet.ReasonPolicyRefused naming the Policy; the deployments already
// written stay as they are.
func (r *Reconciler) authorize(ctx context.Context, s *scope) error {
	policies, err := restriction.LoadPolicies(ctx, r.Client, s.bundle.Namespace)
	if err != nil {
		return err
	}
	if err := policies.Bundle(&s.bundle.Spec); err != nil {
		return err
	}
	s.createNamespace = policies.CreateNamespace()
	return nil
}

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
	t := target.NewTargeter(s.compiled, s.contentName)
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
			d, ok, err := t.Target(cluster, groups)
			switch {
			case err != nil:
				s.errs = append(s.errs, err)
			case ok:
				if err := stampCreateNamespace(d, s.createNamespace, s.contentName); err != nil {
					s.errs = append(s.errs, err)
					continue
				}
				s.targets = append(s.targets, *d)
			}
		}
	}
	sort.Slice(s.targets, func(i, j int) bool { return s.targets[i].Namespace < s.targets[j].Namespace })
	return nil
}

// stampCreateNamespace sets createNamespace: false on a deployment whose
// Policies say so (see restriction.Policies.CreateNamespace), as Fleet
// stamps it on the BundleDeploymentOptions, whatever the bundle says; the
// deploymentID follows its options. The options may be shared with other
// deployments, so they are copied before they change.
func stampCreateNamespace(d *target.Deployment, createNamespace *bool, contentName string) error {
	if createNamespace == nil || *createNamespace || (d.Options.CreateNamespace != nil && !*d.Options.CreateNamespace) {
		return nil
	}
	opts := d.Options.DeepCopy()
	opts.CreateNamespace = ptr.To(false)
	id, err := target.DeploymentID(contentName, *opts)
	if err != nil {
		return err
	}
	d.Options, d.ID = opts, id
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
	// patched receives the BundleDeployments patched, as the API server
	// returned them, one slot per patch (the writes run in parallel).
	var patched []*fleet.BundleDeployment
	wanted := make(map[string]bool, len(s.targets))
	for i, t := range s.targets {
		wanted[t.Namespace] = true
		existing := s.existing[t.Namespace]
		switch {
		case existing == nil && !plan.Create[i]:
			// Held back by maxNew; a later pass creates it.
		case existing == nil:
			desired := target.BundleDeployment(s.bundle, s.contentName, &t)
			writes = append(writes, func() error {
				err := r.Client.Create(ctx, desired)
				// AlreadyExists: made by another writer and not in the cache
				// yet; its event brings this bundle back with a fresher view.
				if err == nil || apierrors.IsAlreadyExists(err) {
					r.mem.created(s.bundle.UID, desired, time.Now())
					if err == nil && s.agentSecret != nil {
						return r.ensureAgentSecret(ctx, s.agentSecret(desired), desired)
					}
					return nil
				}
				return err
			})
		case s.createOnly, target.Unchanged(s.bundle, s.contentName, &t, existing, deployNow(plan.Deploy[i], existing, &t)):
		default:
			desired := target.BundleDeployment(s.bundle, s.contentName, &t)
			if !deployNow(plan.Deploy[i], existing, &t) {
				// Stage only: the cluster keeps what it runs.
				desired.Spec.DeploymentID, desired.Spec.Options = existing.Spec.DeploymentID, *existing.Spec.Options.DeepCopy()
				desired.Spec.OCIContents = existing.Spec.OCIContents
				desired.Spec.HelmChartOptions = existing.Spec.HelmChartOptions
			}
			// A merge patch of spec and labels: the agent patches status all the
			// time, and an update would conflict with it.
			before := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: existing.Name, Namespace: existing.Namespace, Labels: existing.Labels}, Spec: existing.Spec}
			after := before.DeepCopy()
			after.Spec, after.Labels = desired.Spec, desired.Labels
			// sealedResources belong to the downstreamresource controller.
			after.Spec.SealedResources = existing.Spec.SealedResources
			slot := len(patched)
			patched = append(patched, nil)
			writes = append(writes, func() error {
				if err := r.Client.Patch(ctx, after, client.MergeFrom(before)); err != nil {
					return client.IgnoreNotFound(err)
				}
				r.mem.patched(s.bundle.UID, after, time.Now())
				patched[slot] = after
				return nil
			})
		}
	}
	for ns, bd := range s.existing {
		if !wanted[ns] && !s.createOnly {
			if r.heldByWindow(bd) {
				// Removing it uninstalls: a change the window holds, as
				// Fleet holds it. The window's opening brings it back here.
				continue
			}
			bd := bd.DeepCopy()
			writes = append(writes, func() error {
				if err := client.IgnoreNotFound(r.Client.Delete(ctx, bd)); err != nil {
					return err
				}
				return r.deleteHelmOpsSecret(ctx, bd)
			})
		}
	}
	err := r.runParallel(writes)
	// The status counts the deployments as this pass left them: one just
	// given a new deploymentID is waiting for its agent, not still ready
	// with the previous one (the status is stamped with the bundle's new
	// generation, which readers take as "for this spec").
	for _, bd := range patched {
		if bd != nil {
			s.existing[bd.Namespace] = bd
		}
	}
	return err
}

// heldByWindow tells whether bd's cluster is outside its deployment window
// (a Schedule holds it and none is open).
func (r *Reconciler) heldByWindow(bd *fleet.BundleDeployment) bool {
	if r.clusters == nil {
		return false
	}
	key := bd.Labels[fleet.ClusterNamespaceLabel] + "/" + bd.Labels[fleet.ClusterLabel]
	obj, ok, err := r.clusters.GetByKey(key)
	if err != nil || !ok {
		return false
	}
	c, isCluster := obj.(*fleet.Cluster)
	return isCluster && c.DeletionTimestamp.IsZero() && target.OffSchedule(c)
}

// deployNow tells whether a BundleDeployment gets the desired options now:
// when the rollout moves it, or when it already runs the desired
// deploymentID, which leaves out diff and correctDrift: a change of those
// alone (a comparePatches added for a drift) is not a rollout step, and
// holding it back would leave the cluster Modified for good.
func deployNow(planned bool, existing *fleet.BundleDeployment, t *target.Deployment) bool {
	return planned || existing.Spec.DeploymentID == t.ID
}

// planRollout plans which targets are created and moved in this pass.
func (r *Reconciler) planRollout(s *scope) error {
	cands := make([]Candidate, len(s.targets))
	for i, t := range s.targets {
		c := Candidate{Info: t.Info, State: fleet.Pending, Paused: t.Cluster != nil && t.Cluster.Spec.Paused}
		if bd := s.existing[t.Namespace]; bd != nil {
			c.Exists, c.UpToDate, c.State = true, bd.Spec.DeploymentID == t.ID, summary.State(bd)
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
