package agentbundle

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/intstr"
)

// DefaultMaxUnavailable is the share of a namespace's clusters whose agent
// may be moving to a new version, or be unavailable, at once.
var DefaultMaxUnavailable = intstr.FromString("10%")

// Candidate is one cluster as the rollout sees it.
type Candidate struct {
	// Current is the image its agent Bundle deploys; empty when it has no
	// agent Bundle yet.
	Current string
	// Available tells whether its agent is deployed and Ready at its agent
	// Bundle's current version.
	Available bool
	// Held: the cluster is outside its Schedules' deployment windows. It
	// keeps its image and is left out of the count: it could not use a
	// share of the budget before its window.
	Held bool
}

// inFlight tells whether the cluster counts against the budget: it has an
// agent Bundle that its agent has not yet deployed and made Ready.
func (c Candidate) inFlight() bool { return c.Current != "" && !c.Available && !c.Held }

// Plan returns the image each candidate's agent Bundle gets in this pass
// ("" for no agent Bundle yet), moving clusters to image in order while
// fewer than budget are in flight. A cluster in flight already moves at no
// cost: it is counted either way, and a broken image is replaced that way.
func Plan(cands []Candidate, image string, budget int) []string {
	inFlight := 0
	for _, c := range cands {
		if c.inFlight() {
			inFlight++
		}
	}
	out := make([]string, len(cands))
	for i, c := range cands {
		switch {
		case c.Held:
			out[i] = c.Current
		case c.Current == image, c.inFlight():
			out[i] = image
		case inFlight < budget:
			out[i] = image
			inFlight++
		default:
			out[i] = c.Current
		}
	}
	return out
}

// Budget is how many of total clusters may be in flight: maxUnavailable
// of them (a number, or a share rounded down), at least one.
func Budget(maxUnavailable intstr.IntOrString, total int) (int, error) {
	n, err := intstr.GetScaledValueFromIntOrPercent(&maxUnavailable, total, false)
	if err != nil {
		return 0, fmt.Errorf("the agent rollout's maxUnavailable %q: %w", maxUnavailable.String(), err)
	}
	if n < 0 {
		return 0, fmt.Errorf("the agent rollout's maxUnavailable %q is negative", maxUnavailable.String())
	}
	return max(n, 1), nil
}
