package clusterimport

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// Why the agent is (re)installed. These are log values, not condition
// reasons: the Imported condition says Applied after any install.
const (
	InstallAgentMissing      = "AgentMissing"
	InstallRedeployRequested = "RedeployRequested"
	InstallAPIServerChanged  = "APIServerChanged"
	InstallAgentStale        = "AgentStale"
	InstallNotRecorded       = "NotRecorded"
	// InstallAgentElsewhere: an agent runs downstream that this Cluster
	// never installed and that never checked in here: it serves another
	// manager (the Cluster API Cluster was moved here from another
	// management cluster) or nobody. It gets this manager's token.
	InstallAgentElsewhere  = "AgentElsewhere"
	InstallSettingsChanged = "SettingsChanged"
)

// remoteFailure classifies an error of a call to the downstream cluster:
// rejected credentials and refused objects only a person can fix (Stalling);
// an API server that does not answer comes back by itself (Waiting); any
// other answer of the API server is transient and retried with backoff
// (reported as InstallFailed).
func remoteFailure(what string, err error) error {
	switch {
	case apierrors.IsUnauthorized(err):
		return outcome.Stallf(fleet.ReasonKubeconfigInvalid, "%s: the cluster rejected the kubeconfig's credentials (Unauthorized); update the kubeconfig Secret", what)
	case apierrors.IsForbidden(err):
		return outcome.Stallf(fleet.ReasonInstallFailed, "%s: the kubeconfig's user lacks the rights to install the agent (it needs cluster-admin): %w", what, err)
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return outcome.Stallf(fleet.ReasonInstallFailed, "%s: %w", what, err)
	case apierrors.ReasonForError(err) != metav1.StatusReasonUnknown:
		return fmt.Errorf("%s: %w", what, err)
	}
	return outcome.Waitf(fleet.ReasonClusterUnreachable, 0, "%s: %w", what, err)
}

// SecretNamespaceAllowed tells whether a Cluster of namespace clusterNS may
// take its kubeconfig Secret from namespace secretNS: its own always, another
// only when listed in allowed.
func SecretNamespaceAllowed(clusterNS, secretNS string, allowed []string) bool {
	return secretNS == clusterNS || slices.Contains(allowed, secretNS)
}

// MayAdopt tells whether an import of identity clientID may take over
// adoptable Clusters registered by token: only when there are any and the
// cluster the kubeconfig reaches has that identity (kube-system UID
// downstreamUID), so that naming another cluster's clientID takes nothing.
// With nothing to adopt there is nothing to refuse.
func MayAdopt(clientID, downstreamUID string, adoptable int) bool {
	return adoptable == 0 || clientID != "" && clientID == downstreamUID
}

// importedOutcome is how outcome.Compute sets the Imported condition after a
// reconcile that ended with err: False with the error's reason (InstallFailed
// for a transient error), else True, AgentRegistered once the agent checks
// in and Applied until then.
func importedOutcome(c *fleet.Cluster, err error, registered bool) outcome.Input {
	in := outcome.Input{
		Object:         c,
		Condition:      fleet.ConditionImported,
		SuccessReason:  fleet.ReasonApplied,
		SuccessMessage: "the agent's objects are applied; waiting for the agent to register and check in",
		FallbackReason: fleet.ReasonInstallFailed,
		Err:            err,
		Action:         "Import",
	}
	if registered {
		in.SuccessReason, in.SuccessMessage = fleet.ReasonAgentRegistered, "the agent is registered and checks in"
	}
	return in
}

// importStatus is the part of a Cluster's status this controller owns and
// applies: the Imported condition (conditions are a map list keyed by type,
// so the other writers' entries stay as they are) and the install record.
type importStatus struct {
	Conditions              []metav1.Condition `json:"conditions,omitempty"`
	AgentDeployedGeneration *int64             `json:"agentDeployedGeneration,omitempty"`
	APIServerURL            string             `json:"apiServerURL,omitempty"`
	APIServerCAHash         string             `json:"apiServerCAHash,omitempty"`
	// AgentTLSMode and GarbageCollectionInterval are the agent settings of
	// the manager's (not the Cluster's) the agent was last installed with.
	AgentTLSMode              string           `json:"agentTLSMode,omitempty"`
	GarbageCollectionInterval *metav1.Duration `json:"garbageCollectionInterval,omitempty"`
}

// ownedStatus picks this controller's fields out of a Cluster's status.
func ownedStatus(s *fleet.ClusterStatus) importStatus {
	out := importStatus{AgentDeployedGeneration: s.AgentDeployedGeneration, APIServerURL: s.APIServerURL, APIServerCAHash: s.APIServerCAHash,
		AgentTLSMode: s.AgentTLSMode, GarbageCollectionInterval: s.GarbageCollectionInterval}
	if c := meta.FindStatusCondition(s.Conditions, fleet.ConditionImported); c != nil {
		out.Conditions = []metav1.Condition{*c}
	}
	return out
}

// AgentRegistered tells whether the agent has checked in since it was last
// (re)started by an install, and recently enough not to be stale.
func AgentRegistered(lastSeen, restartedAt, now time.Time, staleAfter time.Duration) bool {
	if lastSeen.IsZero() || lastSeen.Before(restartedAt.Truncate(time.Second)) {
		return false
	}
	return now.Sub(lastSeen) < staleAfter
}

// Deployed is what the manager can see of an installed agent: its
// Deployment's annotations.
type Deployed struct {
	// Exists is false when the agent Deployment is missing downstream.
	Exists bool
	// SettingsHash is the hash of the settings it was installed with.
	SettingsHash string
	// RestartedAt is when an install last (re)started it.
	RestartedAt time.Time
}

// Wanted is what the agent should be.
type Wanted struct {
	SettingsHash string
	// Generation is spec.redeployAgentGeneration.
	Generation int64
	// APIServerURL and APIServerCAHash tell the agent where the manager is.
	APIServerURL, APIServerCAHash string
}

// Decision says whether, and how, to (re)install the agent.
type Decision struct {
	// Reason is empty when nothing needs doing.
	Reason string
	// Restart rolls the agent (new restart stamp) and hands it a fresh
	// registration token, so that it can register again.
	Restart bool
}

// Decide compares the deployed agent with the wanted one. status holds what
// the last install recorded; lastSeen is the agent's last check-in.
func Decide(d Deployed, w Wanted, status fleet.ClusterStatus, now time.Time, staleAfter time.Duration) Decision {
	switch {
	case !d.Exists:
		return Decision{Reason: InstallAgentMissing, Restart: true}
	case status.AgentDeployedGeneration != nil && *status.AgentDeployedGeneration != w.Generation:
		return Decision{Reason: InstallRedeployRequested, Restart: true}
	case status.APIServerURL != "" && (status.APIServerURL != w.APIServerURL || status.APIServerCAHash != w.APIServerCAHash):
		return Decision{Reason: InstallAPIServerChanged, Restart: true}
	case status.AgentDeployedGeneration == nil && status.Agent.LastSeen.IsZero():
		return Decision{Reason: InstallAgentElsewhere, Restart: true}
	case Stale(status.Agent.LastSeen.Time, d.RestartedAt, now, staleAfter):
		return Decision{Reason: InstallAgentStale, Restart: true}
	case status.AgentDeployedGeneration == nil:
		return Decision{Reason: InstallNotRecorded}
	case d.SettingsHash != w.SettingsHash:
		return Decision{Reason: InstallSettingsChanged}
	}
	return Decision{}
}

// Stale tells whether the agent has been silent for staleAfter: neither a
// check-in nor a restart by an install within that time.
func Stale(lastSeen, restartedAt, now time.Time, staleAfter time.Duration) bool {
	return now.Sub(latest(lastSeen, restartedAt)) >= staleAfter
}

// NextCheck is when to look at the cluster again: every checkInterval, or
// sooner when the agent would turn stale.
func NextCheck(lastSeen, restartedAt, now time.Time, staleAfter, checkInterval time.Duration) time.Duration {
	untilStale := latest(lastSeen, restartedAt).Add(staleAfter).Sub(now) + time.Second
	if untilStale > 0 && untilStale < checkInterval {
		return untilStale
	}
	return checkInterval
}

func latest(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// SettingsHash hashes what an install puts downstream, except the
// registration token and the manager's address (compared on their own).
func SettingsHash(o agentinstall.Options) string {
	o.Bootstrap = nil
	b, err := json.Marshal(o)
	if err != nil {
		// Options are plain data; this cannot happen.
		panic(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])[:16]
}

// CAHash is status.apiServerCAHash for a CA: empty for none.
func CAHash(ca []byte) string {
	if len(ca) == 0 {
		return ""
	}
	sum := sha256.Sum256(ca)
	return hex.EncodeToString(sum[:])
}
