package bundledeployment

import (
	"errors"
	"fmt"
	"time"

	"github.com/gitfleet/fleet/agent/deployrpc"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// maxBoundRetry caps the wait between two tries of a deployment that keeps
// meeting a bound of the deploy binary (unless one try's bound is longer).
const maxBoundRetry = time.Hour

// boundHit is a deployment stopped at a bound of the deploy binary (its
// time or its memory, deployrpc.IsBound), remembered so that the same
// deployment is not tried again before its backoff ends: the resync and
// drift bring a BundleDeployment back much more often, and each try may
// hold a deploy slot for the whole bound. A change of the BundleDeployment
// (a new deploymentID, a new generation) is tried at once.
type boundHit struct {
	deploymentID string
	generation   int64
	// hits counts the tries of this deployment stopped at a bound in a row.
	hits    int
	reason  string
	message string
	retryAt time.Time
}

// boundRetry is the wait after the hits-th try in a row stopped at a
// bound: base (what the deploy binary's runner asks for, at least its
// bound) doubled for each hit after the first, at most maxBoundRetry.
func boundRetry(base time.Duration, hits int) time.Duration {
	d := base
	for i := 1; i < hits && d < maxBoundRetry; i++ {
		d *= 2
	}
	return min(d, max(maxBoundRetry, base))
}

// heldBack is the error a deployment stopped at a bound is reported with
// until its backoff ends; nil when it may be tried.
func (r *Reconciler) heldBack(bd *fleet.BundleDeployment, now time.Time) error {
	v, ok := r.bounds.Load(bd.Name)
	if !ok {
		return nil
	}
	h := v.(*boundHit)
	if h.deploymentID != bd.Spec.DeploymentID || h.generation != bd.Generation || !now.Before(h.retryAt) {
		return nil
	}
	// The message stays as it was written: the status does not change
	// while the deployment waits.
	return outcome.Wait(h.reason, h.retryAt.Sub(now), errors.New(h.message))
}

// noteDeploy remembers a deploy's outcome and returns the error to report:
// a deploy stopped at a bound waits for its backoff, which grows while the
// same deployment keeps meeting it; any other outcome forgets it.
func (r *Reconciler) noteDeploy(bd *fleet.BundleDeployment, err error, now time.Time) error {
	var w *outcome.Waiting
	if !deployrpc.IsBound(err) || !errors.As(err, &w) {
		r.bounds.Delete(bd.Name)
		return err
	}
	hits := 1
	if v, ok := r.bounds.Load(bd.Name); ok {
		if h := v.(*boundHit); h.deploymentID == bd.Spec.DeploymentID && h.generation == bd.Generation {
			hits = h.hits + 1
		}
	}
	wait := boundRetry(w.After, hits)
	h := &boundHit{deploymentID: bd.Spec.DeploymentID, generation: bd.Generation, hits: hits, reason: w.Reason,
		retryAt: now.Add(wait),
		message: fmt.Sprintf("%v (%d tries in a row); the agent tries again in %s, at once when the bundle changes", err, hits, wait)}
	r.bounds.Store(bd.Name, h)
	return outcome.Wait(h.reason, wait, errors.New(h.message))
}
