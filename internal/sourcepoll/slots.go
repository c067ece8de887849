package sourcepoll

import (
	"math/rand/v2"
	"time"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/fairshare"
	"github.com/gitfleet/fleet/internal/outcome"
)

// Slots shares a controller's fetch slots, one per worker, among
// namespaces: the objects of one namespace hold at most half of them
// (rounded up) at once, so one tenant's slow source cannot stall the
// others. The zero value is ready to use.
type Slots struct {
	slots fairshare.Slots
}

// Take takes a slot for namespace ns, of workers slots in all, and returns
// the function that gives it back. When the namespace holds its share
// already it returns a Waiting error (fleet.ReasonFetchBusy) that names
// what the slots are for ("git fetch slots") and comes back in one to two
// seconds.
func (s *Slots) Take(ns string, workers int, what string) (release func(), err error) {
	if !s.slots.Take(ns, fairshare.Share(workers)) {
		retry := time.Second + time.Duration(rand.Int64N(int64(time.Second))) //nolint:gosec // G404: spreads retries over time; it guards nothing
		return nil, outcome.Waitf(fleet.ReasonFetchBusy, retry,
			"namespace %s already holds its share of the %s", ns, what)
	}
	return func() { s.slots.Release(ns) }, nil
}
