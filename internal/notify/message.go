package notify

import (
	"fmt"
	"strings"
	"time"
)

// SchemaVersion is the version of the webhook document; a change that
// removes or renames a field gets a new one.
const SchemaVersion = "v1"

// Message is what is told about one transition of one rollout. It is also
// the generic webhook's JSON document (docs/notifications.md).
type Message struct {
	// Version is SchemaVersion.
	Version string `json:"version"`
	// ID identifies the message: the same transition of the same rollout
	// always has the same ID, so a receiver can drop a repeat.
	ID string `json:"id"`
	// Event is Started, PartitionReached, Succeeded, Failed or Stalled.
	Event string `json:"event"`
	// Namespace, Kind (GitRepo or HelmOp) and Name say whose rollout.
	Namespace string `json:"namespace"`
	Kind      string `json:"kind"`
	Name      string `json:"name"`
	// Revision is the commit (GitRepo) or chart version (HelmOp).
	Revision string `json:"revision"`
	// Repo is the GitRepo's repository URL, or the HelmOp's chart
	// repository.
	Repo string `json:"repo,omitempty"`
	// CommitURL is the commit's page on its host, when the host is known.
	CommitURL string `json:"commitURL,omitempty"`
	// Partition names the partition reached (PartitionReached only).
	Partition string `json:"partition,omitempty"`
	// StartedAt is when the rollout was first seen, Time when this message
	// was made.
	StartedAt time.Time `json:"startedAt"`
	Time      time.Time `json:"time"`
	// Clusters counts the targeted clusters and the ready ones.
	Clusters Clusters `json:"clusters"`
	// Deployments counts the rollout's bundle deployments by state.
	Deployments Counts `json:"deployments"`
	// Errors are the first failures (at most MaxErrors).
	Errors []Failure `json:"errors,omitempty"`
	// Text is the message in one line, as chat destinations show it.
	Text string `json:"text"`
}

// Clusters counts clusters.
type Clusters struct {
	Desired int `json:"desired"`
	Ready   int `json:"ready"`
}

// Counts counts bundle deployments by state.
type Counts struct {
	Desired     int `json:"desired"`
	Ready       int `json:"ready"`
	NotReady    int `json:"notReady"`
	WaitApplied int `json:"waitApplied"`
	ErrApplied  int `json:"errApplied"`
	OutOfSync   int `json:"outOfSync"`
	Modified    int `json:"modified"`
	Pending     int `json:"pending"`
}

// Failure is one cluster (or Bundle) that failed, and why.
type Failure struct {
	// Bundle is the Bundle concerned.
	Bundle string `json:"bundle"`
	// Cluster is the cluster's "namespace/name"; empty when the Bundle
	// itself is broken.
	Cluster string `json:"cluster,omitempty"`
	// State is the deployment's state (ErrApplied, NotReady, ...).
	State string `json:"state,omitempty"`
	// Message is the error.
	Message string `json:"message"`
}

// MaxErrors bounds Message.Errors.
const MaxErrors = 5

// maxErrorLen bounds the text of one error in a message.
const maxErrorLen = 300

// State is what a commit status says of a transition.
type State string

// Commit status states, mapped to each host's words.
const (
	StatePending State = "pending"
	StateSuccess State = "success"
	StateFailure State = "failure"
)

// CommitState is the commit status of an event: pending while rolling out,
// success or failure at the end; "" for an event that changes nothing on a
// commit status (a partition reached).
func CommitState(event string) State {
	switch event {
	case "Started":
		return StatePending
	case "Succeeded":
		return StateSuccess
	case "Failed", "Stalled":
		return StateFailure
	}
	return ""
}

// ShortRevision is a commit's first 12 characters, as shown in messages.
func ShortRevision(rev string) string {
	if len(rev) > 12 && isHex(rev) {
		return rev[:12]
	}
	return rev
}

func isHex(s string) bool {
	for _, c := range s {
		if !strings.ContainsRune("0123456789abcdefABCDEF", c) {
			return false
		}
	}
	return true
}

// Summary is the one line that says what the message is about, e.g.
// "Failed: commit 0123abcd4567 of GitRepo fleet-default/app: 412/500
// clusters ready, 1 failed: fleet-default/edge-1: chart not found".
func Summary(m *Message) string {
	var b strings.Builder
	what := "commit"
	if m.Kind == "HelmOp" {
		what = "version"
	}
	fmt.Fprintf(&b, "%s: %s %s of %s %s/%s", m.Event, what, ShortRevision(m.Revision), m.Kind, m.Namespace, m.Name)
	if m.Partition != "" {
		fmt.Fprintf(&b, ", partition %s", m.Partition)
	}
	fmt.Fprintf(&b, ": %d/%d clusters ready", m.Clusters.Ready, m.Clusters.Desired)
	if n := m.Deployments.ErrApplied; n > 0 {
		fmt.Fprintf(&b, ", %d failed", n)
	}
	for i, f := range m.Errors {
		if i == 0 {
			b.WriteString(": ")
		} else {
			b.WriteString("; ")
		}
		b.WriteString(f.String())
	}
	return b.String()
}

// String is "cluster: message", or "Bundle name: message" when the Bundle
// itself is broken.
func (f Failure) String() string {
	who := f.Cluster
	if who == "" {
		who = "Bundle " + f.Bundle
	}
	return who + ": " + Truncate(f.Message, maxErrorLen)
}

// Truncate cuts s to at most n bytes of valid UTF-8, marking the cut.
func Truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	if n <= 3 {
		return strings.ToValidUTF8(s[:n], "")
	}
	return strings.ToValidUTF8(s[:n-3], "") + "..."
}
