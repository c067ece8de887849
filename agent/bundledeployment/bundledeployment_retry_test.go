package bundledeployment

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

func TestBoundRetry(t *testing.T) {
	g := NewWithT(t)
	for _, tc := range []struct {
		base time.Duration
		hits int
		want time.Duration
	}{
		{time.Minute, 1, time.Minute},
		{time.Minute, 2, 2 * time.Minute},
		{10 * time.Minute, 3, 40 * time.Minute},
		{10 * time.Minute, 4, time.Hour},
		{10 * time.Minute, 40, time.Hour},
		{2 * time.Hour, 3, 2 * time.Hour},
	} {
		g.Expect(boundRetry(tc.base, tc.hits)).To(Equal(tc.want), "base %s, %d hits", tc.base, tc.hits)
	}
}

// A deployment stopped at a bound is not tried again before its backoff
// ends, which doubles while it keeps meeting the bound; its status message
// does not change meanwhile; a change of the BundleDeployment, or a deploy
// that ends otherwise, starts afresh.
func TestHeldBackAfterABound(t *testing.T) {
	g := NewWithT(t)
	r := &Reconciler{}
	bd := &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Name: "loop", Generation: 1},
		Spec: fleet.BundleDeploymentSpec{DeploymentID: "s-abc:1"}}
	now := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	timedOut := outcome.Waitf(fleet.ReasonDeployTimedOut, time.Minute, "ran longer than the agent's bound")

	g.Expect(r.heldBack(bd, now)).To(Succeed(), "nothing remembered")
	err := r.noteDeploy(bd, timedOut, now)
	var w *outcome.Waiting
	g.Expect(errors.As(err, &w)).To(BeTrue())
	g.Expect(w.Reason).To(Equal(fleet.ReasonDeployTimedOut))
	g.Expect(w.After).To(Equal(time.Minute))
	g.Expect(err).To(MatchError(ContainSubstring("ran longer than the agent's bound (1 tries in a row); the agent tries again in 1m0s")))

	held := r.heldBack(bd, now.Add(20*time.Second))
	g.Expect(outcome.ReasonOf(held, "")).To(Equal(fleet.ReasonDeployTimedOut))
	g.Expect(held.Error()).To(Equal(err.Error()), "the status does not change while it waits")
	g.Expect(errors.As(held, &w)).To(BeTrue())
	g.Expect(w.After).To(Equal(40*time.Second), "looked at again when the backoff ends")
	g.Expect(r.heldBack(bd, now.Add(time.Minute))).To(Succeed(), "tried again once the backoff ended")

	err = r.noteDeploy(bd, timedOut, now.Add(time.Minute))
	g.Expect(errors.As(err, &w)).To(BeTrue())
	g.Expect(w.After).To(Equal(2*time.Minute), "the backoff doubles")
	g.Expect(r.heldBack(bd, now.Add(2*time.Minute))).NotTo(Succeed())

	changed := bd.DeepCopy()
	changed.Generation, changed.Spec.DeploymentID = 2, "s-def:1"
	g.Expect(r.heldBack(changed, now.Add(2*time.Minute))).To(Succeed(), "a changed bundle is tried at once")
	err = r.noteDeploy(changed, outcome.Waitf(fleet.ReasonDeployOutOfMemory, time.Minute, "ran out of memory"), now)
	g.Expect(errors.As(err, &w)).To(BeTrue())
	g.Expect(w.After).To(Equal(time.Minute), "the count starts again for a changed bundle")
	g.Expect(w.Reason).To(Equal(fleet.ReasonDeployOutOfMemory))

	failed := outcome.Stallf(fleet.ReasonInstallFailed, "chart broken")
	g.Expect(r.noteDeploy(changed, failed, now)).To(Equal(failed), "other errors pass as they are")
	g.Expect(r.heldBack(changed, now)).To(Succeed(), "and forget the bound")
	g.Expect(r.noteDeploy(changed, nil, now)).To(Succeed())
}
