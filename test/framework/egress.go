package framework

import (
	"slices"

	"github.com/gitfleet/fleet/internal/egress"
)

// AllowLoopback returns p widened to loopback, which the manager refuses
// by default: the git and chart servers of the tests listen there. Denials
// of p stay, and win (a spec may deny one loopback address to attack it).
func AllowLoopback(p egress.Policy) egress.Policy {
	p.Allow = append(slices.Clip(p.Allow), egress.AllowLoopback().Allow...)
	return p
}

// EgressAllowLoopbackArgs are the fleet-manager flags that allow loopback,
// for tests that run the manager's binary against loopback git servers.
var EgressAllowLoopbackArgs = []string{"--egress-allow-cidrs", "127.0.0.0/8,::1/128"}
