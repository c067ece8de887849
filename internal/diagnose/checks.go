package diagnose

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/summary"
)

func object(kind, namespace, name string) string { return kind + " " + namespace + "/" + name }

func bdObject(bd *fleet.BundleDeployment) string {
	return object("BundleDeployment", bd.Namespace, bd.Name)
}

// clusterOf names the Cluster of a BundleDeployment, as "namespace/name".
func clusterOf(bd *fleet.BundleDeployment) string {
	if c := bd.Labels[fleet.ClusterLabel]; c != "" {
		return bd.Labels[fleet.ClusterNamespaceLabel] + "/" + c
	}
	return bd.Namespace
}

func ago(now, t time.Time) string {
	if t.IsZero() {
		return "never"
	}
	return now.Sub(t).Round(time.Second).String() + " ago"
}

// since is when a BundleDeployment's Ready condition last changed, else
// when it was created.
func since(bd *fleet.BundleDeployment) time.Time {
	if c := meta.FindStatusCondition(bd.Status.Conditions, fleet.ConditionReady); c != nil {
		return c.LastTransitionTime.Time
	}
	return bd.CreationTimestamp.Time
}

func readable(s *Snapshot, kind string) bool {
	for _, k := range s.Unreadable {
		if k == kind {
			return false
		}
	}
	return true
}

// lastCheckIn is a Cluster's last check-in: its Lease's renewal or
// status.agent.lastSeen, the later.
func lastCheckIn(s *Snapshot, c *fleet.Cluster) time.Time {
	last := c.Status.Agent.LastSeen.Time
	ns := names.ClusterNamespaceFor(c.Namespace, c.Name, c.Status.Namespace)
	for i := range s.Leases {
		l := &s.Leases[i]
		if l.Namespace == ns && l.Name == fleet.AgentLeaseName && l.Spec.RenewTime != nil && l.Spec.RenewTime.After(last) {
			last = l.Spec.RenewTime.Time
		}
	}
	return last
}

func agentOffline(s *Snapshot, o Options) []Finding {
	var out []Finding
	leases := readable(s, KindLease)
	for i := range s.Clusters {
		c := &s.Clusters[i]
		obj := object("Cluster", c.Namespace, c.Name)
		last := lastCheckIn(s, c)
		ready := meta.FindStatusCondition(c.Status.Conditions, fleet.ConditionReady)
		switch {
		case c.Status.Display.State == fleet.ClusterStateOffline || (ready != nil && ready.Reason == fleet.ClusterStateOffline):
			out = append(out, Finding{Check: CheckAgentOffline, Severity: Critical, Object: obj,
				Message: fmt.Sprintf("the agent is Offline: last check-in %s; no change reaches this cluster", ago(s.Taken, last)),
				Action:  "check the agent's pod and logs downstream (namespace " + agentNamespace(c) + ") and that it reaches the manager's API server; it is back as soon as it checks in"})
		case c.Status.Display.State == fleet.ClusterStateWaitCheckIn || last.IsZero():
			if s.Taken.Sub(c.CreationTimestamp.Time) > o.StuckAfter {
				out = append(out, Finding{Check: CheckAgentOffline, Severity: Warning, Object: obj,
					Message: fmt.Sprintf("no agent has checked in since the Cluster was created %s", ago(s.Taken, c.CreationTimestamp.Time)),
					Action:  "register an agent (fleet install agent-token, then the agent's chart) or, for an imported cluster, read its Imported condition"})
			}
		case leases && s.Taken.Sub(last) > o.SilentAfter:
			out = append(out, Finding{Check: CheckAgentOffline, Severity: Warning, Object: obj,
				Message: fmt.Sprintf("the agent is silent: last check-in %s (not Offline yet)", ago(s.Taken, last)),
				Action:  "check the agent's pod downstream (namespace " + agentNamespace(c) + "): restarts, logs, its connection to the manager"})
		}
	}
	return out
}

func agentNamespace(c *fleet.Cluster) string {
	switch {
	case c.Status.Agent.Namespace != "":
		return c.Status.Agent.Namespace
	case c.Spec.AgentNamespace != "":
		return c.Spec.AgentNamespace
	}
	return "cattle-fleet-system"
}

func agentOutdated(s *Snapshot, o Options) []Finding {
	images := map[string]int{}
	var agents []*fleet.Bundle
	for i := range s.Bundles {
		b := &s.Bundles[i]
		if b.Labels[fleet.AgentBundleLabel] != "true" {
			continue
		}
		agents = append(agents, b)
		images[b.Annotations[fleet.AgentImageAnnotation]]++
	}
	want := o.AgentImage
	if want == "" {
		best := -1
		for img, n := range images {
			if n > best || (n == best && img > want) {
				want, best = img, n
			}
		}
	}
	var out []Finding
	for _, b := range agents {
		if img := b.Annotations[fleet.AgentImageAnnotation]; img != want {
			out = append(out, Finding{Check: CheckAgentOutdated, Severity: Warning, Object: object("Bundle", b.Namespace, b.Name),
				Message: fmt.Sprintf("the agent runs %s, not %s", img, want),
				Action:  "the manager rolls agents out with the agent Bundle's rollout strategy; see the other findings for what holds it, or the Cluster's agent settings"})
			continue
		}
		for i := range s.BundleDeployments {
			bd := &s.BundleDeployments[i]
			if bd.Namespace != b.Namespace || bd.Name != b.Name {
				continue
			}
			if h := b.Labels[fleet.AgentBundleHashLabel]; h != "" && bd.Labels[fleet.AgentBundleHashLabel] != h {
				out = append(out, Finding{Check: CheckAgentOutdated, Severity: Warning, Object: bdObject(bd),
					Message: "the manager has not moved this cluster's agent to its current version (" + want + ") yet",
					Action:  "a rollout partition may hold it (see rollout-held), or the cluster is Offline"})
			}
		}
	}
	return out
}

func deployFailed(s *Snapshot, _ Options) []Finding {
	var out []Finding
	for i := range s.BundleDeployments {
		bd := &s.BundleDeployments[i]
		if summary.State(bd) != fleet.ErrApplied || deployedReason(bd) == fleet.ReasonWaitingForDeps {
			continue
		}
		out = append(out, Finding{Check: CheckDeployFailed, Severity: Critical, Object: bdObject(bd),
			Message: fmt.Sprintf("the agent of cluster %s could not deploy it: %s", clusterOf(bd), summary.Message(bd)),
			Action:  "fix what the message names in the bundle's source (fleet.yaml, values, chart); the next commit is deployed again"})
	}
	return out
}

func deployedReason(bd *fleet.BundleDeployment) string {
	if c := meta.FindStatusCondition(bd.Status.Conditions, fleet.ConditionDeployed); c != nil {
		return c.Reason
	}
	return ""
}

func stuckWaitApplied(s *Snapshot, o Options) []Finding {
	var out []Finding
	for i := range s.BundleDeployments {
		bd := &s.BundleDeployments[i]
		if summary.State(bd) != fleet.WaitApplied || deployedReason(bd) == fleet.ReasonWaitingForDeps {
			continue
		}
		t := since(bd)
		if s.Taken.Sub(t) <= o.StuckAfter {
			continue
		}
		msg := fmt.Sprintf("waiting to be applied on cluster %s since %s (deploymentID %s, applied %q)",
			clusterOf(bd), ago(s.Taken, t), bd.Spec.DeploymentID, bd.Status.AppliedDeploymentID)
		action := "is the cluster's agent online (agent-offline)? read the agent's log for this BundleDeployment"
		if bd.Spec.Paused {
			msg += "; it is paused"
			action = "unpause the GitRepo or Bundle (spec.paused)"
		}
		out = append(out, Finding{Check: CheckStuckWaitApplied, Severity: Warning, Object: bdObject(bd), Message: msg, Action: action})
	}
	return out
}

func modified(s *Snapshot, _ Options) []Finding {
	var out []Finding
	for i := range s.BundleDeployments {
		bd := &s.BundleDeployments[i]
		if summary.State(bd) != fleet.Modified {
			continue
		}
		var what []string
		for _, m := range bd.Status.ModifiedStatus {
			what = append(what, m.String())
		}
		out = append(out, Finding{Check: CheckModified, Severity: Warning, Object: bdObject(bd),
			Message: fmt.Sprintf("deployed objects on cluster %s differ from the bundle: %s", clusterOf(bd), strings.Join(what, "; ")),
			Action: fmt.Sprintf("see the drift with `fleet bundlediff --bundle-deployment %s/%s`; undo it (correctDrift, or a forceSyncGeneration) "+
				"or, when it is expected, ignore it with the diff.comparePatches `fleet bundlediff --fleet-yaml` prints", bd.Namespace, bd.Name)})
	}
	return out
}

// available is the rollout's view of a deployment: Ready, or Modified
// (drift does not hold a rollout in Fleet).
func available(st fleet.BundleState) bool { return st == fleet.Ready || st == fleet.Modified }

func rolloutHeld(s *Snapshot, _ Options) []Finding {
	byBundle := map[string][]*fleet.BundleDeployment{}
	for i := range s.BundleDeployments {
		bd := &s.BundleDeployments[i]
		key := bd.Labels[fleet.BundleNamespaceLabel] + "/" + bd.Labels[fleet.BundleNameLabel]
		byBundle[key] = append(byBundle[key], bd)
	}
	var out []Finding
	for i := range s.Bundles {
		b := &s.Bundles[i]
		var waiting, holding []string
		for _, bd := range byBundle[b.Namespace+"/"+b.Name] {
			st := summary.State(bd)
			switch {
			case st == fleet.OutOfSync:
				waiting = append(waiting, clusterOf(bd))
			case !available(st):
				holding = append(holding, fmt.Sprintf("%s (%s)", clusterOf(bd), st))
			}
		}
		pending := b.Status.Summary.Pending
		if len(waiting) == 0 && (pending == 0 || len(holding) == 0) {
			continue
		}
		sort.Strings(waiting)
		sort.Strings(holding)
		msg := fmt.Sprintf("the rollout holds %d cluster(s) at the previous version", len(waiting))
		if len(waiting) > 0 {
			msg += ": " + strings.Join(waiting, ", ")
		}
		if pending > 0 {
			msg += fmt.Sprintf(", and %d targeted cluster(s) have no BundleDeployment yet", pending)
		}
		if len(holding) > 0 {
			msg += fmt.Sprintf("; not ready, and so holding it: %s", strings.Join(holding, ", "))
		}
		msg += fmt.Sprintf(" (unavailable %d of max %d, partitions %d of max %d)",
			b.Status.Unavailable, b.Status.MaxUnavailable, b.Status.UnavailablePartitions, b.Status.MaxUnavailablePartitions)
		out = append(out, Finding{Check: CheckRolloutHeld, Severity: Warning, Object: object("Bundle", b.Namespace, b.Name), Message: msg,
			Action: "make the holding clusters Ready (see their own findings), or raise rolloutStrategy.maxUnavailable / maxUnavailablePartitions in fleet.yaml"})
	}
	return out
}

// dependsOnCycle finds bundles whose dependsOn entries, followed, come back
// to them: none of them can ever deploy.
func dependsOnCycle(s *Snapshot, _ Options) []Finding {
	byNS := map[string][]*fleet.Bundle{}
	for i := range s.Bundles {
		byNS[s.Bundles[i].Namespace] = append(byNS[s.Bundles[i].Namespace], &s.Bundles[i])
	}
	var out []Finding
	seen := map[string]bool{}
	for ns, bundles := range byNS {
		edges := map[string][]string{}
		for _, b := range bundles {
			for _, ref := range b.Spec.DependsOn {
				for _, d := range bundles {
					if refers(ref, d) {
						edges[b.Name] = append(edges[b.Name], d.Name)
					}
				}
			}
		}
		for _, cycle := range cycles(edges) {
			key := ns + "/" + strings.Join(cycle, ",")
			if seen[key] {
				continue
			}
			seen[key] = true
			out = append(out, Finding{Check: CheckDependsOnCycle, Severity: Critical, Object: object("Bundle", ns, cycle[0]),
				Message: "dependsOn is cyclic: " + strings.Join(append(cycle, cycle[0]), " -> ") + "; none of these bundles will ever deploy",
				Action:  "remove one of the dependsOn entries in these bundles' fleet.yaml"})
		}
	}
	return out
}

func refers(ref fleet.BundleRef, b *fleet.Bundle) bool {
	if ref.Name != "" {
		return ref.Name == b.Name
	}
	if ref.Selector == nil {
		return false
	}
	sel, err := metav1.LabelSelectorAsSelector(ref.Selector)
	return err == nil && sel.Matches(labels.Set(b.Labels))
}

// cycles returns each elementary cycle reached by a depth-first walk of
// edges once, rotated to start at its least name.
func cycles(edges map[string][]string) [][]string {
	nodes := make([]string, 0, len(edges))
	for n := range edges {
		nodes = append(nodes, n)
	}
	sort.Strings(nodes)
	const (
		white = iota
		grey
		black
	)
	color := map[string]int{}
	var stack []string
	var found [][]string
	var visit func(n string)
	visit = func(n string) {
		color[n] = grey
		stack = append(stack, n)
		next := append([]string(nil), edges[n]...)
		sort.Strings(next)
		for _, m := range next {
			switch color[m] {
			case white:
				visit(m)
			case grey:
				i := len(stack) - 1
				for stack[i] != m {
					i--
				}
				found = append(found, rotate(append([]string(nil), stack[i:]...)))
			}
		}
		stack = stack[:len(stack)-1]
		color[n] = black
	}
	for _, n := range nodes {
		if color[n] == white {
			visit(n)
		}
	}
	return found
}

func rotate(c []string) []string {
	least := 0
	for i := range c {
		if c[i] < c[least] {
			least = i
		}
	}
	return append(c[least:], c[:least]...)
}

func dependsOnWaiting(s *Snapshot, o Options) []Finding {
	var out []Finding
	for i := range s.BundleDeployments {
		bd := &s.BundleDeployments[i]
		c := meta.FindStatusCondition(bd.Status.Conditions, fleet.ConditionDeployed)
		if c == nil || c.Reason != fleet.ReasonWaitingForDeps {
			continue
		}
		if c.Status == metav1.ConditionFalse {
			out = append(out, Finding{Check: CheckDependsOnWaiting, Severity: Critical, Object: bdObject(bd),
				Message: fmt.Sprintf("a dependency is not deployed to cluster %s at all: %s", clusterOf(bd), c.Message),
				Action:  "target the bundle it depends on at this cluster too, or change the dependsOn entry"})
			continue
		}
		if s.Taken.Sub(c.LastTransitionTime.Time) <= o.StuckAfter {
			continue
		}
		out = append(out, Finding{Check: CheckDependsOnWaiting, Severity: Warning, Object: bdObject(bd),
			Message: fmt.Sprintf("on cluster %s since %s: %s", clusterOf(bd), ago(s.Taken, c.LastTransitionTime.Time), c.Message),
			Action:  "make the named bundles Ready on this cluster (see their findings), or widen dependsOn[].acceptedStates"})
	}
	return out
}

func tokenExpiring(s *Snapshot, o Options) []Finding {
	var out []Finding
	for i := range s.Tokens {
		t := &s.Tokens[i]
		// The manager's own import tokens (import-token-<cluster>) are
		// replaced by it before they expire: nothing for a user to do.
		if t.Status.Expires == nil || strings.HasPrefix(t.Name, fleet.ImportTokenPrefix) {
			continue
		}
		left := t.Status.Expires.Sub(s.Taken)
		switch {
		case left <= 0:
			out = append(out, Finding{Check: CheckTokenExpiring, Severity: Info, Object: object("ClusterRegistrationToken", t.Namespace, t.Name),
				Message: "expired " + ago(s.Taken, t.Status.Expires.Time) + "; it is deleted and no agent can register with it",
				Action:  "create a new token for clusters still to register (fleet install agent-token)"})
		case left <= o.TokenWarning:
			out = append(out, Finding{Check: CheckTokenExpiring, Severity: Warning, Object: object("ClusterRegistrationToken", t.Namespace, t.Name),
				Message: fmt.Sprintf("expires in %s (%s)", left.Round(time.Minute), t.Status.Expires.UTC().Format(time.RFC3339)),
				Action:  "register the clusters that still need it before then, or create a token with a longer spec.ttl"})
		}
	}
	return out
}

func notImported(s *Snapshot, _ Options) []Finding {
	var out []Finding
	for i := range s.Clusters {
		c := &s.Clusters[i]
		cond := meta.FindStatusCondition(c.Status.Conditions, fleet.ConditionImported)
		if cond == nil || cond.Status != metav1.ConditionFalse || cond.Reason == fleet.ReasonMovedAway {
			continue
		}
		out = append(out, Finding{Check: CheckNotImported, Severity: Critical, Object: object("Cluster", c.Namespace, c.Name),
			Message: fmt.Sprintf("no agent installed (%s): %s", cond.Reason, cond.Message),
			Action:  "fix what the message names (the kubeconfig Secret, Cluster API's bootstrap, an identity conflict); the import is retried"})
	}
	return out
}

func gitRepoFetch(s *Snapshot, _ Options) []Finding {
	var out []Finding
	for i := range s.GitRepos {
		g := &s.GitRepos[i]
		for _, t := range []string{fleet.ConditionAccepted, fleet.ConditionGitPolling} {
			c := meta.FindStatusCondition(g.Status.Conditions, t)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason == fleet.ReasonFetchBusy {
				continue
			}
			out = append(out, Finding{Check: CheckGitRepoFetch, Severity: Critical, Object: object("GitRepo", g.Namespace, g.Name),
				Message: fmt.Sprintf("%s=False (%s): %s; deployed commit %s", t, c.Reason, c.Message, short(g.Status.Commit)),
				Action:  "fix what the message names (repository URL, branch or revision, credentials, fleet.yaml); the GitRepo keeps polling"})
			break
		}
	}
	return out
}

func short(commit string) string {
	if commit == "" {
		return "none"
	}
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

func gitRepoBehind(s *Snapshot, _ Options) []Finding {
	var out []Finding
	for i := range s.GitRepos {
		g := &s.GitRepos[i]
		obj := object("GitRepo", g.Namespace, g.Name)
		if g.Spec.Paused {
			continue
		}
		if g.Status.WebhookCommit != "" && g.Status.WebhookCommit != g.Status.Commit {
			out = append(out, Finding{Check: CheckGitRepoBehind, Severity: Warning, Object: obj,
				Message: fmt.Sprintf("a push announced commit %s, still deploying %s", short(g.Status.WebhookCommit), short(g.Status.Commit)),
				Action:  "see the GitRepo's GitPolling condition and the manager's log"})
			continue
		}
		interval := fleet.DefaultPollingInterval
		if g.Spec.PollingInterval != nil && g.Spec.PollingInterval.Duration > 0 {
			interval = g.Spec.PollingInterval.Duration
		}
		last := g.Status.LastPollingTriggered.Time
		if last.IsZero() || s.Taken.Sub(last) <= 3*interval+time.Minute {
			continue
		}
		out = append(out, Finding{Check: CheckGitRepoBehind, Severity: Warning, Object: obj,
			Message: fmt.Sprintf("last polled %s, its interval is %s", ago(s.Taken, last), interval),
			Action:  "is the manager running and the leader? see its log and the fleet_gitrepo_fetch_latest_commit_duration_seconds metric"})
	}
	return out
}
