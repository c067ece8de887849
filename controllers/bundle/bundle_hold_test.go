package bundle

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/summary"
)

// statusOf is a bundle status as setStatus writes it for these counts.
func statusOf(sum fleet.BundleSummary, generation int64) *fleet.BundleStatus {
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Generation: generation}}
	setStatus(b, statusInput{counted: true, summary: sum}, nil)
	return &b.Status
}

func TestHoldStatusOnlyCountsDuringARollout(t *testing.T) {
	t0 := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	rolling := func(ready, wait int) fleet.BundleSummary {
		return fleet.BundleSummary{Ready: ready, WaitApplied: wait, DesiredReady: 100}
	}
	for _, tc := range []struct {
		name     string
		was, now *fleet.BundleStatus
		last, at time.Time
		want     time.Duration
	}{
		{"counts move during a rollout", statusOf(rolling(10, 90), 2), statusOf(rolling(20, 80), 2), t0, t0.Add(time.Second), 4 * time.Second},
		{"hold over", statusOf(rolling(10, 90), 2), statusOf(rolling(20, 80), 2), t0, t0.Add(6 * time.Second), 0},
		{"no write known", statusOf(rolling(10, 90), 2), statusOf(rolling(20, 80), 2), time.Time{}, t0, 0},
		{"the rollout lands", statusOf(rolling(90, 10), 2), statusOf(rolling(100, 0), 2), t0, t0.Add(time.Second), 0},
		{"a new generation observed", statusOf(rolling(10, 90), 1), statusOf(rolling(20, 80), 2), t0, t0.Add(time.Second), 0},
		{"an error appears", statusOf(rolling(10, 90), 2), statusOf(fleet.BundleSummary{Ready: 10, WaitApplied: 89, ErrApplied: 1, DesiredReady: 100}, 2), t0, t0.Add(time.Second), 0},
		{"no rollout: a cluster goes NotReady", statusOf(rolling(100, 0), 2), statusOf(fleet.BundleSummary{Ready: 99, NotReady: 1, DesiredReady: 100}, 2), t0, t0.Add(time.Second), 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := holdStatus(tc.was, tc.now, tc.last, tc.at); got != tc.want {
				t.Errorf("holdStatus = %v, want %v (Ready %q then %q)", got, tc.want, summary.Describe(tc.was.Summary), summary.Describe(tc.now.Summary))
			}
		})
	}
}
