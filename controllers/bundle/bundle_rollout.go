package bundle

import (
	"fmt"

	"k8s.io/apimachinery/pkg/util/intstr"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/internal/target"
)

// Rollout defaults, as Fleet's.
var (
	defaultMaxUnavailable           = intstr.FromString("100%")
	defaultMaxUnavailablePartitions = intstr.FromInt32(0)
	defaultAutoPartitionSize        = intstr.FromString("25%")
)

const (
	defaultAutoPartitionThreshold = 200
	defaultMaxNew                 = 50
)

// Candidate is one targeted cluster as the rollout sees it.
type Candidate struct {
	Info *target.ClusterInfo
	// Exists: the cluster has a BundleDeployment already.
	Exists bool
	// UpToDate: its deploymentID is the desired one.
	UpToDate bool
	// State of the existing BundleDeployment (Pending when none).
	State fleet.BundleState
}

// Plan is what one pass of the rollout does.
type Plan struct {
	// Deploy[i] tells whether candidate i gets the desired deploymentID now
	// (created, or updated); otherwise a change is only staged.
	Deploy []bool
	// Create[i] tells whether candidate i's BundleDeployment is created now.
	Create []bool
	// More is set when creations were held back by maxNew.
	More   bool
	Status fleet.BundleStatus
}

// PlanRollout decides which clusters move to the desired deploymentID in this
// pass. Clusters are split into partitions (explicit ones, in order, then the
// unmatched rest; or automatic ones above autoPartitionThreshold). Within a
// partition at most maxUnavailable clusters may be not Ready, so a Ready
// cluster is only updated while that budget lasts; once more partitions than
// maxUnavailablePartitions are over budget, later partitions wait. At most
// maxNew BundleDeployments are created per pass. A paused bundle creates
// BundleDeployments (paused) but moves none.
func PlanRollout(cands []Candidate, rs *fleet.RolloutStrategy, paused bool) (Plan, error) {
	if rs == nil {
		rs = &fleet.RolloutStrategy{}
	}
	p := Plan{Deploy: make([]bool, len(cands)), Create: make([]bool, len(cands))}
	parts, err := partition(cands, rs)
	if err != nil {
		return p, err
	}
	maxNew := defaultMaxNew
	if rs.MaxNew != nil {
		maxNew = *rs.MaxNew
	}
	maxParts := scaled(rs.MaxUnavailablePartitions, defaultMaxUnavailablePartitions, len(parts), 0)
	p.Status.MaxNew, p.Status.MaxUnavailablePartitions = maxNew, maxParts

	overBudget := 0
	for _, part := range parts {
		budget := scaled(part.maxUnavailable, *orDefault(rs.MaxUnavailable, &defaultMaxUnavailable), len(part.members), 1)
		ps := fleet.PartitionStatus{Name: part.name, Count: len(part.members), MaxUnavailable: budget}
		unavailable := 0
		for _, i := range part.members {
			summary.Add(&ps.Summary, cands[i].State)
			if cands[i].Exists && !Available(cands[i].State) {
				unavailable++
			}
		}
		ps.Unavailable = unavailable
		frozen := paused || overBudget > maxParts
		for _, i := range part.members {
			c := cands[i]
			switch {
			case !c.Exists:
				if p.Status.NewlyCreated >= maxNew {
					p.More = true
					continue
				}
				p.Create[i], p.Deploy[i] = true, true
				p.Status.NewlyCreated++
			case c.UpToDate || frozen:
			case !Available(c.State):
				// Already unavailable: updating it costs no budget.
				p.Deploy[i] = true
			case unavailable < budget:
				p.Deploy[i] = true
				unavailable++
			}
		}
		if unavailable > budget || (ps.Unavailable > 0 && ps.Unavailable >= budget) {
			overBudget++
		}
		p.Status.MaxUnavailable += budget
		p.Status.Partitions = append(p.Status.Partitions, ps)
	}
	p.Status.UnavailablePartitions = overBudget
	if len(p.Status.Partitions) <= 1 {
		// One partition says nothing the bundle's own summary does not.
		p.Status.Partitions = nil
	}
	return p, nil
}

// Available tells whether a deployment in this state runs a Ready release.
// A staged change (OutOfSync) or a modified resource does not make it
// unavailable: counting those would let a rollout that staged a change move
// every staged cluster on its next pass.
func Available(s fleet.BundleState) bool {
	return s == fleet.Ready || s == fleet.OutOfSync || s == fleet.Modified
}

type partitionOf struct {
	name           string
	maxUnavailable *intstr.IntOrString
	members        []int
}

// partition splits candidates (sorted by the caller) into rollout partitions.
func partition(cands []Candidate, rs *fleet.RolloutStrategy) ([]partitionOf, error) {
	all := func(name string) []partitionOf {
		p := partitionOf{name: name}
		for i := range cands {
			p.members = append(p.members, i)
		}
		return []partitionOf{p}
	}
	if len(rs.Partitions) > 0 {
		// Partitions select clusters exactly as targets do: compile them as
		// the targets of a bundle and take the first match.
		b := &fleet.Bundle{}
		parts := make([]partitionOf, len(rs.Partitions), len(rs.Partitions)+1)
		for i, part := range rs.Partitions {
			name := part.Name
			if name == "" {
				name = fmt.Sprintf("partition%d", i)
			}
			parts[i] = partitionOf{name: name, maxUnavailable: part.MaxUnavailable}
			b.Spec.Targets = append(b.Spec.Targets, fleet.BundleTarget{Name: name, ClusterName: part.ClusterName,
				ClusterSelector: part.ClusterSelector, ClusterGroup: part.ClusterGroup, ClusterGroupSelector: part.ClusterGroupSelector})
		}
		compiled, err := target.Compile(b)
		if err != nil {
			return nil, fmt.Errorf("rolloutStrategy.partitions: %w", err)
		}
		rest := partitionOf{name: "unpartitioned"}
		for i, c := range cands {
			res, ok := compiled.Match(c.Info)
			if !ok {
				rest.members = append(rest.members, i)
				continue
			}
			for j := range parts {
				if parts[j].name == res.Target {
					parts[j].members = append(parts[j].members, i)
					break
				}
			}
		}
		if len(rest.members) > 0 {
			parts = append(parts, rest)
		}
		return parts, nil
	}
	threshold := defaultAutoPartitionThreshold
	if rs.AutoPartitionThreshold != nil {
		threshold = *rs.AutoPartitionThreshold
	}
	if len(cands) <= threshold {
		return all("all"), nil
	}
	size := max(scaledUp(rs.AutoPartitionSize, defaultAutoPartitionSize, len(cands)), 1)
	var parts []partitionOf
	for start := 0; start < len(cands); start += size {
		p := partitionOf{name: fmt.Sprintf("auto-partition-%d", len(parts))}
		for i := start; i < min(start+size, len(cands)); i++ {
			p.members = append(p.members, i)
		}
		parts = append(parts, p)
	}
	return parts, nil
}

func orDefault(v, d *intstr.IntOrString) *intstr.IntOrString {
	if v == nil {
		return d
	}
	return v
}

// scaled resolves a number-or-percentage of total, rounding down, at least
// floor (when total allows).
func scaled(v *intstr.IntOrString, d intstr.IntOrString, total, floor int) int {
	n, err := intstr.GetScaledValueFromIntOrPercent(orDefault(v, &d), total, false)
	if err != nil || n < floor {
		n = floor
	}
	return n
}

func scaledUp(v *intstr.IntOrString, d intstr.IntOrString, total int) int {
	n, err := intstr.GetScaledValueFromIntOrPercent(orDefault(v, &d), total, true)
	if err != nil {
		return total
	}
	return n
}
