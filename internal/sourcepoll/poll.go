package sourcepoll

import (
	"math/rand/v2"
	"time"

	"github.com/gitfleet/fleet/internal/outcome"
)

// JitterFraction is how much Jitter varies a polling interval, either way,
// so that objects created together do not poll together forever.
const JitterFraction = 0.1

// Poll is what a controller remembers, in memory, of the polling of one
// object: most reconciles (a Bundle's status changed, the last status
// patch came back) are not polls, and must neither ask the source again nor
// lose what the last poll found. A restart polls every object once.
// Reconciles of one object never run at once, so it needs no lock.
type Poll struct {
	// Done is set once the source was polled, for Generation of the
	// object.
	Done       bool
	Generation int64
	// Next is when polling is due again.
	Next time.Time
	// Retry asks for a poll at once: the last one failed transiently, or
	// what kept the object from being polled may have been fixed.
	Retry bool
}

// Due says whether the source must be polled now: it never was, a retry
// was asked for, the spec changed (generation), or, for an object that
// polls at an interval (polling), the interval is over.
func (p *Poll) Due(now time.Time, generation int64, polling bool) bool {
	switch {
	case !p.Done, p.Retry, p.Generation != generation:
		return true
	case !polling:
		return false
	}
	return !now.Before(p.Next)
}

// Start records a poll of generation starting at now; the next one is due
// after interval.
func (p *Poll) Start(now time.Time, generation int64, interval time.Duration) {
	p.Done, p.Generation, p.Retry = true, generation, false
	p.Next = now.Add(interval)
}

// Fail records the error of a poll and returns it: a transient one asks
// for the next reconcile (after backoff) to poll again; a stalling one
// waits for the next poll, or a change of the spec.
func (p *Poll) Fail(err error) error {
	if err != nil && !outcome.IsStalling(err) {
		p.Retry = true
	}
	return err
}

// Hold records that the object could not be polled (its spec, or a
// GitRepoRestriction, is wrong): it comes back after interval, and is
// polled at once when what held it is fixed.
func (p *Poll) Hold(now time.Time, interval time.Duration) {
	p.Retry = true
	p.Next = now.Add(interval)
}

// Until is how long the object waits for its next poll: 0 when it does not
// poll at an interval (polling false), only a change brings it back.
func (p *Poll) Until(now time.Time, polling bool) time.Duration {
	if !polling {
		return 0
	}
	return max(p.Next.Sub(now), time.Millisecond)
}

// Jitter varies d by up to ±JitterFraction; f is a random number in
// [0, 1).
func Jitter(d time.Duration, f float64) time.Duration {
	return time.Duration(float64(d) * (1 - JitterFraction + 2*JitterFraction*f))
}

// Jittered is d varied at random by up to ±JitterFraction.
func Jittered(d time.Duration) time.Duration {
	return Jitter(d, rand.Float64()) //nolint:gosec // G404: jitter spreads polls over time; it guards nothing
}
