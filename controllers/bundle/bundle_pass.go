package bundle

import (
	"context"
	"maps"
	"time"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/target"
)

// A full pass matches every cluster, works out every desired
// BundleDeployment and compares it with what exists. Most events during a
// rollout are agents reporting status, which change none of that. For them a
// status pass reuses the targets of the last full pass, recounts, and replans
// the rollout; only when the plan then wants a write does the full pass run.
// At 5000 clusters this was most of the manager's allocations.

// fullPassEvery bounds how long a status pass may trust the last full pass.
const fullPassEvery = 2 * time.Minute

// statusDelay coalesces the status changes of many deployments into one pass.
const statusDelay = 250 * time.Millisecond

// pass is what a status pass reuses of the last full pass of a bundle.
type pass struct {
	generation  int64
	labels      map[string]string
	contentName string
	targets     []target.Deployment // without cluster and options
	at          time.Time
}

// remember keeps what a successful full pass found, for the status passes
// after it.
func (r *Reconciler) remember(s *scope, now time.Time) {
	if len(s.errs) > 0 || s.plan == nil {
		r.mem.forgetPass(s.bundle.UID)
		return
	}
	targets := make([]target.Deployment, len(s.targets))
	for i, t := range s.targets {
		targets[i] = target.Deployment{Info: t.Info, Namespace: t.Namespace, ID: t.ID}
	}
	r.mem.rememberPass(s.bundle.UID, &pass{
		generation: s.bundle.Generation, labels: maps.Clone(s.bundle.Labels),
		contentName: s.contentName, targets: targets, at: now,
	})
}

// statusPass recounts the bundle's deployments against the last full pass's
// targets. It returns false, with s as it found it, when a full pass is due:
// nothing trusted is remembered, or the plan wants a write.
func (r *Reconciler) statusPass(ctx context.Context, s *scope, now time.Time) (bool, error) {
	p, ok := r.mem.lastPass(s.bundle.UID)
	if !ok {
		return false, nil
	}
	if p.generation != s.bundle.Generation || !maps.Equal(p.labels, s.bundle.Labels) || now.Sub(p.at) > fullPassEvery {
		return false, nil
	}
	s.contentName, s.targets = p.contentName, p.targets
	if err := r.listExisting(ctx, s); err != nil {
		return false, err
	}
	if err := r.planRollout(s); err != nil || needsWrites(s.targets, s.existing, s.plan) {
		s.contentName, s.targets, s.existing, s.plan = "", nil, nil, nil
		// A plan that fails is the full pass's to report: it runs next.
		return false, nil //nolint:nilerr // the full pass, due now, plans again and reports the error
	}
	return true, nil
}

// needsWrites tells whether a pass with these targets, existing deployments
// (by cluster namespace) and plan would create, update or delete anything.
func needsWrites(targets []target.Deployment, existing map[string]*fleet.BundleDeployment, plan *Plan) bool {
	found := 0
	for i, t := range targets {
		bd := existing[t.Namespace]
		switch {
		case bd == nil:
			if plan.Create[i] {
				return true
			}
			continue
		case bd.Spec.StagedDeploymentID != t.ID, plan.Deploy[i] && bd.Spec.DeploymentID != t.ID:
			return true
		}
		found++
	}
	// A deployment for a cluster that is no longer targeted must go.
	return found != len(existing)
}
