// Package summary computes the state of BundleDeployments and rolls them up
// into the summaries shown on Bundles, Clusters, ClusterGroups and GitRepos.
// Everything here is a pure function of its inputs, so every status writer
// computes states the same way.
package summary

import (
	"fmt"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// MaxNonReady bounds the non-ready entries listed in a summary, and the
// modifiedStatus and nonReadyStatus entries each of them carries.
const MaxNonReady = 10

// MaxPatchLen bounds the patch of a modifiedStatus entry carried in a
// summary: a longer one is left out (the BundleDeployment keeps it), so that
// a summary, copied into Bundles, GitRepos, Clusters and ClusterGroups,
// stays small whatever was changed downstream.
const MaxPatchLen = 1024

// rank orders states from best to worst; the worst wins in summaries.
var rank = map[fleet.BundleState]int{
	fleet.Ready:       0,
	fleet.NotReady:    1,
	fleet.Pending:     2,
	fleet.OutOfSync:   3,
	fleet.Modified:    4,
	fleet.WaitApplied: 5,
	fleet.ErrApplied:  6,
}

// Worse tells whether a is a worse state than b.
func Worse(a, b fleet.BundleState) bool { return rank[a] > rank[b] }

// State is the state of one BundleDeployment, in the order fleet-api.md
// gives: not applied yet (ErrApplied when the last apply failed), not ready,
// a staged change waiting, modified downstream, else Ready.
func State(bd *fleet.BundleDeployment) fleet.BundleState {
	switch {
	case bd.Status.AppliedDeploymentID != bd.Spec.DeploymentID:
		if meta.IsStatusConditionFalse(bd.Status.Conditions, fleet.ConditionDeployed) {
			return fleet.ErrApplied
		}
		return fleet.WaitApplied
	case !bd.Status.Ready:
		return fleet.NotReady
	case bd.Spec.DeploymentID != bd.Spec.StagedDeploymentID:
		return fleet.OutOfSync
	case !bd.Status.NonModified:
		return fleet.Modified
	}
	return fleet.Ready
}

// Message explains a non-ready BundleDeployment in one line.
func Message(bd *fleet.BundleDeployment) string {
	if c := meta.FindStatusCondition(bd.Status.Conditions, fleet.ConditionDeployed); c != nil && c.Status == metav1.ConditionFalse {
		return c.Message
	}
	if c := meta.FindStatusCondition(bd.Status.Conditions, fleet.ConditionReady); c != nil && c.Status == metav1.ConditionFalse && c.Message != "" {
		return c.Message
	}
	// Fleet's words ("job.batch default/x missing"): its UI and users'
	// alerts match on them.
	if len(bd.Status.NonReadyStatus) > 0 {
		return bd.Status.NonReadyStatus[0].String()
	}
	if len(bd.Status.ModifiedStatus) > 0 {
		return bd.Status.ModifiedStatus[0].String()
	}
	return ""
}

// Add counts one state into a summary.
func Add(s *fleet.BundleSummary, state fleet.BundleState) {
	s.DesiredReady++
	switch state {
	case fleet.Ready:
		s.Ready++
	case fleet.NotReady:
		s.NotReady++
	case fleet.Pending:
		s.Pending++
	case fleet.OutOfSync:
		s.OutOfSync++
	case fleet.Modified:
		s.Modified++
	case fleet.WaitApplied:
		s.WaitApplied++
	case fleet.ErrApplied:
		s.ErrApplied++
	}
}

// Merge adds b's counts into a.
func Merge(a *fleet.BundleSummary, b fleet.BundleSummary) {
	a.DesiredReady += b.DesiredReady
	a.Ready += b.Ready
	a.NotReady += b.NotReady
	a.Pending += b.Pending
	a.OutOfSync += b.OutOfSync
	a.Modified += b.Modified
	a.WaitApplied += b.WaitApplied
	a.ErrApplied += b.ErrApplied
	for _, r := range b.NonReadyResources {
		if len(a.NonReadyResources) < MaxNonReady {
			a.NonReadyResources = append(a.NonReadyResources, r)
		}
	}
}

// AddCounts adds b's resource counts into a.
func AddCounts(a *fleet.ResourceCounts, b fleet.ResourceCounts) {
	a.Ready += b.Ready
	a.DesiredReady += b.DesiredReady
	a.WaitApplied += b.WaitApplied
	a.Modified += b.Modified
	a.Orphaned += b.Orphaned
	a.Missing += b.Missing
	a.Unknown += b.Unknown
	a.NotReady += b.NotReady
}

// Of summarizes BundleDeployments; name gives the label of each non-ready
// entry (the cluster for a Bundle, the bundle for a Cluster).
func Of(bds []*fleet.BundleDeployment, name func(*fleet.BundleDeployment) string) fleet.BundleSummary {
	s := fleet.BundleSummary{}
	var nonReady []fleet.NonReadyResource
	for _, bd := range bds {
		st := State(bd)
		Add(&s, st)
		if st != fleet.Ready {
			nonReady = append(nonReady, fleet.NonReadyResource{Name: name(bd), State: st, Message: Message(bd),
				ModifiedStatus: modifiedOf(bd.Status.ModifiedStatus), NonReadyStatus: nonReadyOf(bd.Status.NonReadyStatus)})
		}
	}
	sort.Slice(nonReady, func(i, j int) bool {
		if nonReady[i].State != nonReady[j].State {
			return Worse(nonReady[i].State, nonReady[j].State)
		}
		return nonReady[i].Name < nonReady[j].Name
	})
	if len(nonReady) > MaxNonReady {
		nonReady = nonReady[:MaxNonReady]
	}
	s.NonReadyResources = nonReady
	return s
}

// modifiedOf copies at most MaxNonReady entries (the BundleDeployment may
// be the cache's own), leaving out patches longer than MaxPatchLen.
func modifiedOf(in []fleet.ModifiedStatus) []fleet.ModifiedStatus {
	if len(in) == 0 {
		return nil
	}
	out := make([]fleet.ModifiedStatus, min(len(in), MaxNonReady))
	copy(out, in)
	for i := range out {
		if len(out[i].Patch) > MaxPatchLen {
			out[i].Patch = ""
		}
	}
	return out
}

// nonReadyOf copies at most MaxNonReady entries, deeply: the
// BundleDeployment may be the cache's own.
func nonReadyOf(in []fleet.NonReadyStatus) []fleet.NonReadyStatus {
	if len(in) == 0 {
		return nil
	}
	out := make([]fleet.NonReadyStatus, min(len(in), MaxNonReady))
	for i := range out {
		in[i].DeepCopyInto(&out[i])
	}
	return out
}

// WorstState is the worst state counted in a summary (Ready when empty).
func WorstState(s fleet.BundleSummary) fleet.BundleState {
	switch {
	case s.ErrApplied > 0:
		return fleet.ErrApplied
	case s.WaitApplied > 0:
		return fleet.WaitApplied
	case s.Modified > 0:
		return fleet.Modified
	case s.OutOfSync > 0:
		return fleet.OutOfSync
	case s.Pending > 0:
		return fleet.Pending
	case s.NotReady > 0:
		return fleet.NotReady
	}
	return fleet.Ready
}

// ReadyCondition turns a summary into a Ready condition whose message names
// the worst entries, e.g. "ErrApplied(1) [Cluster edge-1: chart failed]".
func ReadyCondition(s fleet.BundleSummary, generation int64) metav1.Condition {
	c := metav1.Condition{Type: fleet.ConditionReady, ObservedGeneration: generation}
	if s.Ready == s.DesiredReady {
		c.Status, c.Reason = metav1.ConditionTrue, "Ready"
		return c
	}
	c.Status, c.Reason = metav1.ConditionFalse, string(WorstState(s))
	c.Message = Describe(s)
	return c
}

// Describe says in one line what is not ready in a summary.
func Describe(s fleet.BundleSummary) string {
	var parts []string
	for _, st := range []fleet.BundleState{fleet.ErrApplied, fleet.WaitApplied, fleet.Modified, fleet.OutOfSync, fleet.Pending, fleet.NotReady} {
		if n := Count(s, st); n > 0 {
			parts = append(parts, fmt.Sprintf("%s(%d)", st, n))
		}
	}
	var details []string
	for _, r := range s.NonReadyResources {
		d := r.Name + " " + string(r.State)
		if r.Message != "" {
			d += ": " + r.Message
		}
		details = append(details, d)
		if len(details) == 3 {
			break
		}
	}
	msg := strings.Join(parts, ", ")
	if len(details) > 0 {
		msg += " [" + strings.Join(details, "; ") + "]"
	}
	return msg
}

// Count returns the number of deployments in state st.
func Count(s fleet.BundleSummary, st fleet.BundleState) int {
	switch st {
	case fleet.Ready:
		return s.Ready
	case fleet.NotReady:
		return s.NotReady
	case fleet.Pending:
		return s.Pending
	case fleet.OutOfSync:
		return s.OutOfSync
	case fleet.Modified:
		return s.Modified
	case fleet.WaitApplied:
		return s.WaitApplied
	case fleet.ErrApplied:
		return s.ErrApplied
	}
	return 0
}
