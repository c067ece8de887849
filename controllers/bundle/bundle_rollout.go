package bundle

import (
	"fmt"
	"strconv"
	"strings"

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
	// Paused: the Cluster is paused (spec.paused). Its agent applies no
	// change, so none is moved to it: moved, it would hold the budget for
	// ever, as Fleet's rollout knows too.
	Paused bool
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
// pass, as Fleet's rollout does. Clusters are split into partitions (the
// explicit ones, in order, holding only the clusters they select; or
// automatic ones from autoPartitionThreshold clusters on). Partitions are
// rolled out in order: within one, a Ready cluster is updated only while at
// most maxUnavailable of the partition's clusters, and of the bundle's, are
// not Ready; and the next partition is reached only while no more than
// maxUnavailablePartitions partitions have more than their maxUnavailable
// clusters not yet Ready on the desired deploymentID. BundleDeployments are
// created only in the partitions reached, at most maxNew per pass. A paused
// bundle creates BundleDeployments (paused) but moves none.
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
	maxParts := limit(len(parts), rs.MaxUnavailablePartitions, &defaultMaxUnavailablePartitions)
	p.Status.MaxNew, p.Status.MaxUnavailablePartitions = maxNew, maxParts
	// The bundle's own budget, over all its clusters.
	p.Status.MaxUnavailable = limit(len(cands), rs.MaxUnavailable, &defaultMaxUnavailable)
	for _, c := range cands {
		if c.Exists && !Available(c.State) {
			p.Status.Unavailable++
		}
	}

	overBudget, reached := 0, true
	for _, part := range parts {
		budget := limit(len(part.members), part.maxUnavailable, rs.MaxUnavailable, &defaultMaxUnavailable)
		ps := fleet.PartitionStatus{Name: part.name, Count: len(part.members), MaxUnavailable: budget}
		unavailable := 0
		for _, i := range part.members {
			summary.Add(&ps.Summary, cands[i].State)
			if cands[i].Exists && !Available(cands[i].State) {
				unavailable++
			}
		}
		ps.Unavailable = unavailable
		if !reached {
			p.Status.Partitions = append(p.Status.Partitions, ps)
			continue
		}
		for _, i := range part.members {
			c := cands[i]
			switch {
			case !c.Exists:
				if p.Status.NewlyCreated >= maxNew {
					// More in the next batch; with maxNew 0, none ever (as
					// in Fleet), and no batch to wait for.
					p.More = maxNew > 0
					continue
				}
				p.Create[i], p.Deploy[i] = true, true
				p.Status.NewlyCreated++
			case c.UpToDate || paused || c.Paused:
			case !Available(c.State):
				// Already unavailable: updating it costs no budget.
				p.Deploy[i] = true
			case unavailable < budget && p.Status.Unavailable < p.Status.MaxUnavailable:
				p.Deploy[i] = true
				unavailable++
				p.Status.Unavailable++
			}
		}
		// A partition is done with at most maxUnavailable of its clusters
		// not Ready on the desired deploymentID; moving on counts those
		// that are only waiting for it, as Fleet does.
		ps.Unavailable = 0
		for _, i := range part.members {
			c := cands[i]
			if p.Deploy[i] || !c.Exists || !c.UpToDate || !Available(c.State) {
				ps.Unavailable++
			}
		}
		if ps.Unavailable > budget {
			overBudget++
		}
		p.Status.Partitions = append(p.Status.Partitions, ps)
		if overBudget > maxParts {
			reached = false
		}
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
		// A cluster no partition selects is left out of the rollout, as
		// the Fleet documentation says: it is not deployed, or keeps what
		// it has.
		for i, c := range cands {
			res, ok := compiled.Match(c.Info)
			if !ok {
				continue
			}
			for j := range parts {
				if parts[j].name == res.Target {
					parts[j].members = append(parts[j].members, i)
					break
				}
			}
		}
		return parts, nil
	}
	threshold := defaultAutoPartitionThreshold
	if rs.AutoPartitionThreshold != nil {
		threshold = *rs.AutoPartitionThreshold
	}
	off := rs.AutoPartitionSize != nil && rs.AutoPartitionSize.Type == intstr.Int && rs.AutoPartitionSize.IntVal <= 0
	if off || len(cands) < threshold {
		return all("All"), nil
	}
	size := max(limit(len(cands), rs.AutoPartitionSize, &defaultAutoPartitionSize), 1)
	var parts []partitionOf
	for start := 0; start < len(cands); start += size {
		end := min(start+size, len(cands))
		p := partitionOf{name: fmt.Sprintf("Partition %d - %d", start, end)}
		for i := start; i < end; i++ {
			p.members = append(p.members, i)
		}
		parts = append(parts, p)
	}
	return parts, nil
}

// limit resolves the first of vals that is set against count, as Fleet's
// rollout does: a number, or a string holding one, is taken as it is (0
// included, as a number); a percentage of count rounds down, and is at least
// 1; no clusters, or a value that is neither, 1.
func limit(count int, vals ...*intstr.IntOrString) int {
	if count <= 0 {
		return 1
	}
	var v *intstr.IntOrString
	for _, c := range vals {
		if c != nil {
			v = c
			break
		}
	}
	if v == nil {
		return count
	}
	if v.Type == intstr.Int {
		return max(v.IntValue(), 0)
	}
	if n, err := strconv.Atoi(v.StrVal); err == nil && n > 0 {
		return n
	}
	pct, ok := strings.CutSuffix(v.StrVal, "%")
	if !ok {
		return 1
	}
	f, err := strconv.ParseFloat(pct, 64)
	if err != nil || f <= 0 {
		return 1
	}
	return max(int(float64(count)*f)/100, 1)
}
