package clustergroup

import (
	"fmt"
	"sort"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/summary"
)

// computeStatus sets a group's status from its member clusters: their count,
// the ones not Ready, the sum of their bundle summaries and resource counts,
// and Ready, which is
// False while a member or one of its deployments is not ready.
func computeStatus(group *fleet.ClusterGroup, members []*fleet.Cluster) {
	st := &group.Status
	st.ClusterCount = len(members)
	st.Summary = fleet.BundleSummary{}
	st.ResourceCounts = fleet.ResourceCounts{}
	var nonReady []string
	for _, c := range members {
		summary.Merge(&st.Summary, c.Status.Summary)
		summary.AddCounts(&st.ResourceCounts, c.Status.ResourceCounts)
		if !conditions.IsTrue(c, fleet.ConditionReady) {
			nonReady = append(nonReady, c.Name)
		}
	}
	sort.Strings(nonReady)
	st.NonReadyClusterCount = len(nonReady)
	if len(nonReady) > summary.MaxNonReady {
		nonReady = nonReady[:summary.MaxNonReady]
	}
	st.NonReadyClusters = nonReady
	st.Display.ReadyClusters = fmt.Sprintf("%d/%d", st.ClusterCount-st.NonReadyClusterCount, st.ClusterCount)
	st.Display.ReadyBundles = fmt.Sprintf("%d/%d", st.Summary.Ready, st.Summary.DesiredReady)
	st.Display.State = string(summary.WorstState(st.Summary))
	conditions.Set(group, readyCondition(st, group.Generation))
}

// readyCondition is the summary's Ready condition, False with
// ReasonNotReady when the deployments are all ready but a cluster is not.
func readyCondition(st *fleet.ClusterGroupStatus, generation int64) metav1.Condition {
	cond := summary.ReadyCondition(st.Summary, generation)
	if st.NonReadyClusterCount > 0 && cond.Status == metav1.ConditionTrue {
		cond = metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: fleet.ReasonNotReady,
			Message: fmt.Sprintf("%d cluster(s) not ready: %v", st.NonReadyClusterCount, st.NonReadyClusters), ObservedGeneration: generation}
	}
	return cond
}
