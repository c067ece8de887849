package backoff

import (
	"context"
	"math"
	mrand "math/rand/v2"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// Backoff yields capped, jittered exponential waits: Min, then twice that,
// and so on up to Max, each drawn from its upper half.
type Backoff struct {
	Min, Max time.Duration
	attempt  int
}

// New returns a Backoff from lo to hi, at least 100ms and 1s: a loop
// configured with nothing, or with a tiny bound, must not spin.
func New(lo, hi time.Duration) *Backoff {
	return &Backoff{Min: max(lo, 100*time.Millisecond), Max: max(hi, time.Second)}
}

// Next returns the wait before the next attempt.
func (b *Backoff) Next() time.Duration {
	d := float64(b.Min) * math.Pow(2, float64(b.attempt))
	if d > float64(b.Max) || math.IsInf(d, 0) {
		d = float64(b.Max)
	} else {
		b.attempt++
	}
	// Full jitter in [d/2, d): many agents coming back at once spread out.
	return time.Duration(d/2 + mrand.Float64()*d/2) //nolint:gosec // G404: jitter only spreads load, it guards nothing
}

// Reset starts over after a success.
func (b *Backoff) Reset() { b.attempt = 0 }

// Wait waits the next backoff, at most ceiling when ceiling > 0, after an
// attempt that failed with reason. With a message it first logs it, the
// reason and the wait. It returns false when ctx ends first.
func (b *Backoff) Wait(ctx context.Context, ceiling time.Duration, msg string, reason error) bool {
	wait := b.Next()
	if ceiling > 0 {
		wait = min(wait, ceiling)
	}
	if msg != "" {
		kv := []any{"retryIn", wait.Round(time.Millisecond)}
		if reason != nil {
			kv = append([]any{"reason", reason.Error()}, kv...)
		}
		ctrl.LoggerFrom(ctx).Info(msg, kv...)
	}
	return Sleep(ctx, wait)
}

// Sleep waits d; it returns false when ctx ends first.
func Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// Repeat runs step until ctx ends: a loop with work to do at an interval
// (a check-in, a credential's rotation). After a success it waits what step
// returned and starts b over; after a failure it logs failed with the
// reason and waits b's next backoff, at most ceiling when ceiling > 0 (a
// check-in retried no later than its next one was due).
func Repeat(ctx context.Context, b *Backoff, ceiling time.Duration, failed string, step func(context.Context) (time.Duration, error)) {
	for {
		wait, err := step(ctx)
		var ok bool
		if err != nil {
			ok = b.Wait(ctx, ceiling, failed, err)
		} else {
			b.Reset()
			ok = Sleep(ctx, wait)
		}
		if !ok {
			return
		}
	}
}
