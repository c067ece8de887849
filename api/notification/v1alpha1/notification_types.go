package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:categories=fleet
// +kubebuilder:printcolumn:name="Destination",type=string,JSONPath=`.spec.destination.type`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Failing",type=string,JSONPath=`.status.conditions[?(@.type=="DestinationFailing")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Notification tells one destination about the rollouts of the GitRepos and
// HelmOps of its namespace that it selects: one message per rollout
// transition (started, a partition reached, succeeded, failed, stalled), or
// a commit status on the git host (pending while rolling out, success or
// failure at the end).
type Notification struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec says which rollouts, which of their transitions, and where to.
	Spec NotificationSpec `json:"spec"`
	// Status says whether the Notification works and what it has sent.
	Status NotificationStatus `json:"status,omitempty"`
}

// +kubebuilder:object:root=true

// NotificationList is a list of Notifications.
type NotificationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the Notifications.
	Items []Notification `json:"items"`
}

// NotificationSpec says which rollouts to tell about, which of their
// transitions, and to whom.
type NotificationSpec struct {
	// Sources are the GitRepos and HelmOps of the Notification's own
	// namespace whose rollouts are told about.
	Sources Sources `json:"sources,omitempty"`
	// Events are the transitions told about; default Started, Succeeded,
	// Failed and Stalled.
	// +kubebuilder:validation:MaxItems=5
	// +listType=set
	Events []Event `json:"events,omitempty"`
	// StallDeadline is how long a rollout may take before it is told
	// about as Stalled (a Go duration such as "30m"); default 30m.
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:Pattern=`^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$`
	StallDeadline *metav1.Duration `json:"stallDeadline,omitempty"`
	// Destination is where the messages go.
	Destination Destination `json:"destination"`
	// Suspend stops sending; rollouts seen meanwhile are not told about
	// later.
	Suspend bool `json:"suspend,omitempty"`
}

// Sources select GitRepos and HelmOps of the Notification's namespace.
type Sources struct {
	// Kinds are the kinds selected, GitRepo and HelmOp; default both.
	// +kubebuilder:validation:MaxItems=2
	// +listType=set
	Kinds []SourceKind `json:"kinds,omitempty"`
	// Selector selects them by label; empty or absent selects them all.
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// SourceKind is a kind whose rollouts a Notification follows.
// +kubebuilder:validation:Enum=GitRepo;HelmOp
type SourceKind string

// The kinds a Notification follows.
const (
	KindGitRepo SourceKind = "GitRepo"
	KindHelmOp  SourceKind = "HelmOp"
)

// Event is a transition of a rollout.
// +kubebuilder:validation:Enum=Started;PartitionReached;Succeeded;Failed;Stalled
type Event string

// The transitions of a rollout. A rollout is what one commit of a GitRepo
// (or one chart version of a HelmOp) does to its clusters.
const (
	// EventStarted: the Bundles of a new commit or version were written.
	EventStarted Event = "Started"
	// EventPartitionReached: every cluster of one rollout partition is
	// ready (only for Bundles rolled out in several partitions).
	EventPartitionReached Event = "PartitionReached"
	// EventSucceeded: every targeted cluster is ready with the commit.
	EventSucceeded Event = "Succeeded"
	// EventFailed: a cluster failed to apply the commit, or a Bundle of it
	// is broken.
	EventFailed Event = "Failed"
	// EventStalled: the rollout is neither done nor failed after the
	// stall deadline.
	EventStalled Event = "Stalled"
)

// DefaultEvents are the events told about when spec.events is empty.
var DefaultEvents = []Event{EventStarted, EventSucceeded, EventFailed, EventStalled}

// DestinationType is a kind of receiver.
// +kubebuilder:validation:Enum=webhook;slack;msteams;github;gitlab;bitbucket;gitea
type DestinationType string

// The receivers a Notification can send to (docs/notifications.md shows
// each one's payload).
const (
	// DestinationWebhook: a JSON document POSTed to address, signed with
	// HMAC-SHA256 when the Secret holds hmacKey.
	DestinationWebhook DestinationType = "webhook"
	// DestinationSlack: a Slack incoming webhook.
	DestinationSlack DestinationType = "slack"
	// DestinationMSTeams: a Microsoft Teams incoming webhook (Workflows),
	// sent an Adaptive Card.
	DestinationMSTeams DestinationType = "msteams"
	// DestinationGitHub: commit statuses through the GitHub REST API.
	DestinationGitHub DestinationType = "github"
	// DestinationGitLab: commit statuses through the GitLab REST API.
	DestinationGitLab DestinationType = "gitlab"
	// DestinationBitbucket: build statuses through the Bitbucket Cloud
	// REST API.
	DestinationBitbucket DestinationType = "bitbucket"
	// DestinationGitea: commit statuses through the Gitea (or Forgejo,
	// Gogs-compatible) REST API.
	DestinationGitea DestinationType = "gitea"
)

// Destination is one receiver.
type Destination struct {
	// Type is the kind of receiver.
	// +required
	Type DestinationType `json:"type"`
	// Address is the URL messages are sent to: the incoming webhook's URL
	// for webhook, slack and msteams (or the Secret's address key, which
	// wins, since such a URL is itself a credential); the API's base URL
	// for commit statuses, defaulting to https://api.github.com,
	// https://gitlab.com, https://api.bitbucket.org; required for gitea.
	// +kubebuilder:validation:MaxLength=2048
	Address string `json:"address,omitempty"`
	// SecretRef names a Secret of the Notification's namespace holding
	// the credentials: address (a webhook URL), token (the git host's
	// token), username and password (Bitbucket app passwords), hmacKey
	// (the webhook's signing key).
	SecretRef *LocalObjectReference `json:"secretRef,omitempty"`
	// Context names the commit status; default "fleet/<GitRepo name>".
	// Bitbucket keeps at most 40 characters of it.
	// +kubebuilder:validation:MaxLength=255
	Context string `json:"context,omitempty"`
}

// LocalObjectReference names an object of the same namespace.
type LocalObjectReference struct {
	// Name of the object.
	// +required
	// +kubebuilder:validation:MinLength=1
	Name string `json:"name"`
}

// The keys a destination's Secret may hold.
const (
	SecretKeyAddress  = "address"
	SecretKeyToken    = "token"
	SecretKeyUsername = "username"
	SecretKeyPassword = "password"
	SecretKeyHMAC     = "hmacKey"
)

// MaxRollouts bounds status.rollouts: the sources followed at once.
const MaxRollouts = 100

// MaxSent bounds the events recorded for one rollout.
const MaxSent = 16

// NotificationStatus says whether the Notification works and what it has
// sent.
type NotificationStatus struct {
	// ObservedGeneration is the generation of the spec this status is for.
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready (the spec, its Secret and its sources could be
	// read) and DestinationFailing (True while sending keeps failing).
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// Rollouts is the current rollout of each source followed and what was
	// sent about it, so that a restarted manager, or another replica
	// taking over, sends nothing twice.
	// +kubebuilder:validation:MaxItems=100
	// +listType=map
	// +listMapKey=kind
	// +listMapKey=name
	Rollouts []RolloutRecord `json:"rollouts,omitempty"`
}

// RolloutRecord is one source's current rollout and what was sent about it.
type RolloutRecord struct {
	// Kind is GitRepo or HelmOp.
	Kind SourceKind `json:"kind"`
	// Name of the GitRepo or HelmOp.
	Name string `json:"name"`
	// Revision is the commit (or chart version) rolled out.
	Revision string `json:"revision,omitempty"`
	// StartedAt is when the rollout was first seen.
	StartedAt metav1.Time `json:"startedAt,omitempty"`
	// Sent are the events sent, or settled without sending (a rollout that
	// was already over when first seen), e.g. Started,
	// PartitionReached/canary, Succeeded.
	// +kubebuilder:validation:MaxItems=16
	Sent []string `json:"sent,omitempty"`
	// LastSentAt is when the last message of this rollout was sent.
	LastSentAt *metav1.Time `json:"lastSentAt,omitempty"`
}

// Condition types and reasons of a Notification.
const (
	// ConditionReady: the spec, its Secret and its sources could be read.
	ConditionReady = "Ready"
	// ConditionDestinationFailing: sending to the destination keeps
	// failing; deployments go on regardless.
	ConditionDestinationFailing = "DestinationFailing"

	// ReasonReady: the Notification follows its sources.
	ReasonReady = "Ready"
	// ReasonSuspended: spec.suspend is set.
	ReasonSuspended = "Suspended"
	// ReasonInvalidSpec: the spec cannot be acted on (a selector that does
	// not parse, an address that is no http(s) URL); the message says what.
	ReasonInvalidSpec = "InvalidSpec"
	// ReasonSecretNotFound: the Secret spec.destination.secretRef names
	// is missing, or lacks a key the destination needs.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonTooManySources: the selector selects more sources than
	// MaxRollouts; the first by name are followed.
	ReasonTooManySources = "TooManySources"
	// ReasonSendFailed: the destination answered with an error or not at
	// all; the message has its answer. Sending is retried with backoff.
	ReasonSendFailed = "SendFailed"
	// ReasonRejected: the destination refused the message for good (bad
	// credentials, unknown repository); fix the Secret or the address.
	ReasonRejected = "Rejected"
	// ReasonDestinationRefused: the address is refused by the manager's
	// outbound policy.
	ReasonDestinationRefused = "DestinationRefused"
	// ReasonSent: the last message was delivered.
	ReasonSent = "Sent"
)

// GetConditions returns the Notification's conditions.
func (n *Notification) GetConditions() []metav1.Condition { return n.Status.Conditions }

// SetConditions replaces the Notification's conditions.
func (n *Notification) SetConditions(c []metav1.Condition) { n.Status.Conditions = c }
