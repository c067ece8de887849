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
