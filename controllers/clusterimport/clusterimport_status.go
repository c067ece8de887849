package clusterimport

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Reasons of the Imported condition.
const (
	// ReasonSecretMissing: the kubeconfig Secret, or its "value" key, is missing.
	ReasonSecretMissing = "SecretMissing"
	// ReasonKubeconfigInvalid: the kubeconfig cannot be used (unparsable,
	// runs programs, refers to files, or its credentials are rejected).
	ReasonKubeconfigInvalid = "KubeconfigInvalid"
	// ReasonClusterUnreachable: the cluster did not answer in time.
	ReasonClusterUnreachable = "ClusterUnreachable"
	// ReasonIdentityConflict: another imported Cluster reaches the same
	// downstream cluster (same clientID).
	ReasonIdentityConflict = "IdentityConflict"
	// ReasonAdopting: a Cluster registered by token with the same identity is
	// being replaced by this one.
	ReasonAdopting = "Adopting"
	// ReasonWaitingForToken: the import token has not been issued yet.
	ReasonWaitingForToken = "WaitingForToken"
	// ReasonInstallFailed: the cluster refused the agent's objects, or the
	// agent settings are invalid.
	ReasonInstallFailed = "InstallFailed"
	// ReasonApplied: the agent objects are in place; waiting for the agent to
	// register and check in.
	ReasonApplied = "Applied"
	// ReasonAgentRegistered: the agent has registered and checks in.
	ReasonAgentRegistered = "AgentRegistered"
)

// Why the agent is (re)installed, as logged.
const (
	InstallAgentMissing      = "AgentMissing"
	InstallRedeployRequested = "RedeployRequested"
	InstallAPIServerChanged  = "APIServerChanged"
	InstallAgentStale        = "AgentStale"
	InstallNotRecorded       = "NotRecorded"
	InstallSettingsChanged   = "SettingsChanged"
)

// importError carries the Imported reason of a failure and whether retrying
// can help.
type importError struct {
	reason   string
	terminal bool
	err      error
}

func (e *importError) Error() string { return e.err.Error() }
func (e *importError) Unwrap() error { return e.err }

// fail wraps err with the condition reason it stands for.
func fail(reason string, terminal bool, err error) error {
	return &importError{reason: reason, terminal: terminal, err: err}
}

func failf(reason string, terminal bool, format string, args ...any) error {
	return fail(reason, terminal, fmt.Errorf(format, args...))
}

// isTerminal tells user-fixable errors (reconcile.TerminalError, a watch
// brings the fix) from transient ones (retried with backoff).
func isTerminal(err error) bool {
	var ie *importError
	return errors.As(err, &ie) && ie.terminal
}

// remoteFailure classifies an error of a call to the downstream cluster.
func remoteFailure(what string, err error) error {
	switch {
	case apierrors.IsUnauthorized(err):
		return failf(ReasonKubeconfigInvalid, true, "%s: the cluster rejected the kubeconfig's credentials (Unauthorized); update the kubeconfig Secret", what)
	case apierrors.IsForbidden(err):
		return failf(ReasonInstallFailed, true, "%s: the kubeconfig's user lacks the rights to install the agent (it needs cluster-admin): %v", what, err)
	case apierrors.IsInvalid(err) || apierrors.IsBadRequest(err):
		return failf(ReasonInstallFailed, true, "%s: %v", what, err)
	case apierrors.ReasonForError(err) != metav1.StatusReasonUnknown:
		return failf(ReasonInstallFailed, false, "%s: %v", what, err)
	}
	return failf(ReasonClusterUnreachable, false, "%s: %v", what, err)
}

// ImportedCondition is the Imported condition after a reconcile that ended
// with err, or, without error, with the agent registered or not.
func ImportedCondition(err error, registered bool, generation int64) metav1.Condition {
	c := metav1.Condition{Type: fleet.ConditionImported, ObservedGeneration: generation}
	switch {
	case err != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonInstallFailed, err.Error()
		var ie *importError
		if errors.As(err, &ie) {
			c.Reason = ie.reason
		}
	case registered:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonAgentRegistered, "the agent is registered and checks in"
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonApplied, "the agent's objects are applied; waiting for the agent to register and check in"
	}
	return c
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
