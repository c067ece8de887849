package cluster

import (
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/summary"
)

// computeStatus sets a cluster's status from its BundleDeployments, and marks
// it Offline when its agent last checked in (checkIn, internal/checkin.Last)
// more than offlineAfter before now: the statuses it reported may then be out
// of date.
func computeStatus(cluster *fleet.Cluster, ns string, items []fleet.BundleDeployment, checkIn, now time.Time, offlineAfter time.Duration) {
	bds := make([]*fleet.BundleDeployment, len(items))
	for i := range items {
		bds[i] = &items[i]
	}
	st := &cluster.Status
	st.Namespace = ns
	st.Summary = summary.Of(bds, func(bd *fleet.BundleDeployment) string {
		return bd.Labels[fleet.BundleNamespaceLabel] + "/" + bd.Labels[fleet.BundleNameLabel]
	})
	st.ResourceCounts = resourceCounts(bds)
	st.ReadyGitRepos, st.DesiredReadyGitRepos = sourceCounts(bds, fleet.RepoLabel)
	st.ReadyHelmOps, st.DesiredReadyHelmOps = sourceCounts(bds, fleet.HelmOpLabel)
	st.Display.ReadyBundles = fmt.Sprintf("%d/%d", st.Summary.Ready, st.Summary.DesiredReady)
	cond := summary.ReadyCondition(st.Summary, cluster.Generation)
	switch {
	case checkIn.IsZero():
		st.Display.State = fleet.ClusterStateWaitCheckIn
		cond = metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: fleet.ClusterStateWaitCheckIn,
			Message: "waiting for the agent to check in", ObservedGeneration: cluster.Generation}
	case now.Sub(checkIn) > offlineAfter:
		st.Display.State = fleet.ClusterStateOffline
		cond = metav1.Condition{Type: fleet.ConditionReady, Status: metav1.ConditionFalse, Reason: fleet.ClusterStateOffline,
			Message: fmt.Sprintf("the agent has not checked in since %s (more than %s): the status of its deployments may be out of date",
				checkIn.UTC().Format(time.RFC3339), offlineAfter),
			ObservedGeneration: cluster.Generation}
	default:
		st.Display.State = string(summary.WorstState(st.Summary))
	}
	conditions.Set(cluster, cond)
}

// resourceCounts sums the resource counts of a cluster's deployments.
func resourceCounts(bds []*fleet.BundleDeployment) fleet.ResourceCounts {
	var c fleet.ResourceCounts
	for _, bd := range bds {
		summary.AddCounts(&c, bd.Status.ResourceCounts)
	}
	return c
}

// sourceCounts counts the GitRepos (label fleet.RepoLabel) or HelmOps
// (fleet.HelmOpLabel) with a deployment on the cluster (desired), and those
// whose every deployment there is Ready (ready), as Fleet does: a source is
// known by its Bundles' namespace and that label, which the deployments
// carry.
func sourceCounts(bds []*fleet.BundleDeployment, label string) (ready, desired int) {
	repos := map[string]bool{}
	for _, bd := range bds {
		repo, ns := bd.Labels[label], bd.Labels[fleet.BundleNamespaceLabel]
		if repo == "" {
			continue
		}
		key := ns + "/" + repo
		isReady := summary.State(bd) == fleet.Ready
		if was, seen := repos[key]; seen {
			isReady = was && isReady
		}
		repos[key] = isReady
	}
	for _, r := range repos {
		if r {
			ready++
		}
	}
	return ready, len(repos)
}

// offlineCheck is when to look at a cluster again without an event:
// heartbeats do not wake this controller, so it comes back when the cluster
// would turn Offline without one. 0 when it is Offline or never checked in.
func offlineCheck(cluster *fleet.Cluster, checkIn, now time.Time, offlineAfter time.Duration) time.Duration {
	if checkIn.IsZero() || cluster.Status.Display.State == fleet.ClusterStateOffline {
		return 0
	}
	return checkIn.Add(offlineAfter).Sub(now) + time.Second
}

// foldCheckIn is the cluster's status.agent with its check-in Lease folded
// in. A renewal is written into lastSeen only when it shows: the first
// check-in, the check-in of a cluster shown Offline, or once lastSeen is
// refresh old; every other renewal costs the manager no write (Offline is
// computed from the Lease itself, internal/checkin.Last). The agent's
// namespace comes from the Lease's annotation.
func foldCheckIn(st fleet.ClusterStatus, lease *coordinationv1.Lease, refresh time.Duration) fleet.AgentStatus {
	agent := st.Agent
	if lease == nil {
		return agent
	}
	if ns := lease.Annotations[fleet.AgentNamespaceAnnotation]; ns != "" {
		agent.Namespace = ns
	}
	// Stored to the second: a finer renewal would look new every time.
	renewed := checkin.RenewTime(lease).Truncate(time.Second)
	if !renewed.After(agent.LastSeen.Time) {
		return agent
	}
	if agent.LastSeen.IsZero() || st.Display.State == fleet.ClusterStateOffline || renewed.Sub(agent.LastSeen.Time) >= refresh {
		agent.LastSeen = metav1.NewTime(renewed)
	}
	return agent
}

// status is the part of a Cluster's status this controller owns and
// applies (FieldOwner).
type status struct {
	Namespace string `json:"namespace"`
	// Summary is always sent, its counts even when zero: an applied object
	// left with no fields is stored as null by server-side apply
	// (kubernetes#104694), which the schema refuses, and a cluster whose
	// last deployment went away would keep its old summary.
	Summary summaryCounts `json:"summary"`
	// ResourceCounts, ReadyGitRepos and DesiredReadyGitRepos are always
	// sent, zero included, so that a value that dropped to zero is written.
	ResourceCounts       fleet.ResourceCounts `json:"resourceCounts"`
	ReadyGitRepos        int                  `json:"readyGitRepos"`
	DesiredReadyGitRepos int                  `json:"desiredReadyGitRepos"`
	ReadyHelmOps         int                  `json:"readyHelmOps"`
	DesiredReadyHelmOps  int                  `json:"desiredReadyHelmOps"`
	// Display is left out until it has a value, for the same reason.
	Display    *fleet.ClusterDisplay `json:"display,omitempty"`
	Conditions []metav1.Condition    `json:"conditions"`
	// Agent is the check-in folded from the agent's Lease; left out until
	// there is one.
	Agent *agentStatus `json:"agent,omitempty"`
}

// agentStatus is what this controller applies of status.agent: the
// renewalHash written by agents of earlier versions stays theirs.
type agentStatus struct {
	LastSeen  *metav1.Time `json:"lastSeen,omitempty"`
	Namespace string       `json:"namespace,omitempty"`
}

// summaryCounts is a BundleSummary whose desired and ready counts are sent
// even when zero (the shallower fields win over the embedded ones).
type summaryCounts struct {
	fleet.BundleSummary
	DesiredReady int `json:"desiredReady"`
	Ready        int `json:"ready"`
}

// ownedStatus is what this controller applies of a cluster's status.
func ownedStatus(cluster *fleet.Cluster) status {
	st := cluster.Status
	out := status{
		Namespace:  st.Namespace,
		Summary:    summaryCounts{BundleSummary: st.Summary, DesiredReady: st.Summary.DesiredReady, Ready: st.Summary.Ready},
		Conditions: []metav1.Condition{},

		ResourceCounts: st.ResourceCounts, ReadyGitRepos: st.ReadyGitRepos, DesiredReadyGitRepos: st.DesiredReadyGitRepos,
		ReadyHelmOps: st.ReadyHelmOps, DesiredReadyHelmOps: st.DesiredReadyHelmOps,
	}
	if st.Display != (fleet.ClusterDisplay{}) {
		d := st.Display
		out.Display = &d
	}
	if a := st.Agent; !a.LastSeen.IsZero() || a.Namespace != "" {
		out.Agent = &agentStatus{Namespace: a.Namespace}
		if !a.LastSeen.IsZero() {
			seen := a.LastSeen
			out.Agent.LastSeen = &seen
		}
	}
	for _, t := range []string{fleet.ConditionReady, fleet.ConditionProcessed} {
		if c := conditions.Get(cluster, t); c != nil {
			out.Conditions = append(out.Conditions, *c)
		}
	}
	return out
}
