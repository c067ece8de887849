package content

import (
	"time"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// computeStatus sets a Content's status: how many BundleDeployments
// reference it.
func computeStatus(c *fleet.Content, refs int) {
	c.Status.ReferenceCount = refs
}

// held is a Content's reference count seen by a look that did not write
// it, and since when a change of it has been held back.
type held struct {
	refs  int
	since time.Time
}

// countDue tells whether a Content's reference count refs is written over
// written, the count in its status, at now. prev is the change held back
// at an earlier look (nil: none). A count that moved is written once it
// stays the same from one look to the next, or hold after it was first
// held back while it keeps moving: during a rollout to thousands of
// clusters it moves with every deployment updated, and a write for each
// step says nothing the last one will not. Collection does not read it (it
// counts from the index), so it may lag.
func countDue(written, refs int, prev *held, hold time.Duration, now time.Time) bool {
	if refs == written || prev == nil {
		return false
	}
	return prev.refs == refs || !now.Before(prev.since.Add(hold))
}

// untilCollected tells whether a Content created at created with refs
// references is unused, and if so how long it is kept still: a bundle may
// have just created it and not yet written the deployments that reference
// it. 0 means it goes now.
func untilCollected(created time.Time, refs int, grace time.Duration, now time.Time) (time.Duration, bool) {
	if refs > 0 {
		return 0, false
	}
	return max(created.Add(grace).Sub(now), 0), true
}
