package capi

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/conditions"
)

// ConditionFleetAgentReady is the condition this controller writes on Cluster
// API Clusters.
const ConditionFleetAgentReady = "FleetAgentReady"

// Observed is what FleetAgentReady is computed from.
type Observed struct {
	// ControlPlaneInitialized and SecretExists gate enrollment.
	ControlPlaneInitialized bool
	SecretExists            bool
	// SecretName is the kubeconfig Secret waited for.
	SecretName string
	// Fleet is the fleet Cluster, nil before enrollment.
	Fleet *fleet.Cluster
	// Err is this controller's own failure to enroll that only a person can
	// fix (a Stalling error), if any.
	Err error
	// CheckIn is the agent's last check-in (its Lease, internal/checkin);
	// Now and StaleAfter tell whether it is recent.
	CheckIn    time.Time
	Now        time.Time
	StaleAfter time.Duration
}

// checksIn tells whether the agent checked in within StaleAfter.
func (o Observed) checksIn() bool {
	return !o.CheckIn.IsZero() && o.Now.Sub(o.CheckIn) < o.StaleAfter
}

// FleetAgentReadyCondition computes the FleetAgentReady condition. It
// follows the agent's check-ins (the agent pulls, the manager never needs to
// reach the workload cluster for it): True while the agent checks in, even
// when the workload cluster's API cannot be reached from the manager (a
// control plane rolling, a network cut one way), so it does not flap. Before
// the first check-in, and after one that is no longer recent, it tells what
// the installation is doing; its message on failure is the fleet Cluster's
// Imported condition.
func FleetAgentReadyCondition(o Observed, generation int64) metav1.Condition {
	c := metav1.Condition{Type: ConditionFleetAgentReady, Status: metav1.ConditionFalse, ObservedGeneration: generation}
	switch {
	case o.Err != nil:
		c.Reason, c.Message = fleet.ReasonFailed, o.Err.Error()
	case o.Fleet == nil && !o.ControlPlaneInitialized:
		c.Reason, c.Message = fleet.ReasonWaitingForControlPlane, "waiting for the control plane to be initialized"
	case o.Fleet == nil && !o.SecretExists:
		c.Reason, c.Message = fleet.ReasonWaitingForControlPlane, "waiting for the kubeconfig Secret "+o.SecretName
	case o.Fleet == nil:
		c.Reason, c.Message = fleet.ReasonInstalling, "creating the fleet Cluster"
	case !o.Fleet.DeletionTimestamp.IsZero():
		c.Reason, c.Message = fleet.ReasonInstalling, "the fleet Cluster is being deleted; it will be created again"
	case o.checksIn():
		// No time in the message: a renewal must not rewrite it.
		c.Status, c.Reason = metav1.ConditionTrue, fleet.ReasonRegistered
		c.Message = fmt.Sprintf("the fleet agent checks in (last check-in within %s)", o.StaleAfter)
	default:
		imported := meta.FindStatusCondition(o.Fleet.Status.Conditions, fleet.ConditionImported)
		switch {
		case imported == nil:
			c.Reason, c.Message = fleet.ReasonInstalling, "waiting for the fleet manager to install the agent"
		case !o.CheckIn.IsZero():
			c.Reason = fleet.ReasonAgentSilent
			c.Message = fmt.Sprintf("the fleet agent has not checked in since %s (more than %s)", o.CheckIn.UTC().Format(time.RFC3339), o.StaleAfter)
			if imported.Reason != fleet.ReasonAgentRegistered {
				c.Message += "; " + imported.Reason + ": " + imported.Message
			}
		case imported.Reason == fleet.ReasonAgentRegistered:
			// Registered, and yet no check-in: not ready until it checks in.
			c.Reason, c.Message = fleet.ReasonInstalling, "waiting for the fleet agent to check in"
		case imported.Reason == fleet.ReasonApplied, imported.Reason == fleet.ReasonAdopting,
			imported.Reason == fleet.ReasonWaitingForToken:
			c.Reason, c.Message = fleet.ReasonInstalling, imported.Message
		default:
			c.Reason, c.Message = fleet.ReasonFailed, imported.Reason+": "+imported.Message
		}
	}
	return c
}

// UnenrolledCondition is FleetAgentReady of a cluster whose fleet Cluster
// a person deleted at the time at (UnenrolledAnnotation).
func UnenrolledCondition(at string, generation int64) metav1.Condition {
	return metav1.Condition{Type: ConditionFleetAgentReady, Status: metav1.ConditionFalse, ObservedGeneration: generation,
		Reason: fleet.ReasonUnenrolled,
		Message: "the fleet Cluster was deleted at " + at + ", so the manager removed the agent and does not enroll this cluster again: remove annotation " +
			UnenrolledAnnotation + " to enroll it again"}
}

// NextCheckInCheck is when to look again without an event for FleetAgentReady
// to turn False should the agent stop checking in; 0 when it does not check
// in now.
func NextCheckInCheck(o Observed) time.Duration {
	if !o.checksIn() {
		return 0
	}
	return o.CheckIn.Add(o.StaleAfter).Sub(o.Now) + time.Second
}

// capiStatus is the part of a Cluster API Cluster's status this controller
// applies: its one FleetAgentReady entry of status.conditions (a map list
// keyed by type, so Cluster API's own conditions stay as they are), or
// nothing, which removes the entry it applied before.
type capiStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// statusOf is the status to apply for FleetAgentReady c (nil: none).
func statusOf(c *metav1.Condition) capiStatus {
	if c == nil {
		return capiStatus{}
	}
	return capiStatus{Conditions: []metav1.Condition{*c}}
}

// conditionChanged tells whether FleetAgentReady must be written: it says
// something new, or the same about a newer generation.
func conditionChanged(before, after *metav1.Condition) bool {
	if !conditions.Same(before, after) {
		return true
	}
	return after != nil && before.ObservedGeneration != after.ObservedGeneration
}

// conditionEvent is the type of the event that tells a change of
// FleetAgentReady to after ("" for none): a Warning for a failure, Normal
// for progress. Neither the first wait nor a release is news.
func conditionEvent(before, after *metav1.Condition) string {
	switch {
	case after == nil || conditions.Same(before, after):
		return ""
	case after.Reason == fleet.ReasonFailed:
		return corev1.EventTypeWarning
	case before == nil && after.Reason == fleet.ReasonWaitingForControlPlane:
		return ""
	}
	return corev1.EventTypeNormal
}

// ControlPlaneInitialized tells whether the workload cluster's API server
// works: status.initialization.controlPlaneInitialized, or the
// ControlPlaneInitialized condition.
func ControlPlaneInitialized(c *clusterv1.Cluster) bool {
	if c.Status.Initialization.ControlPlaneInitialized != nil && *c.Status.Initialization.ControlPlaneInitialized {
		return true
	}
	return meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1.ClusterControlPlaneInitializedCondition)
}

// Paused tells whether Cluster API (and so this controller) must leave the
// cluster alone: spec.paused, or the cluster.x-k8s.io/paused annotation.
func Paused(c *clusterv1.Cluster) bool {
	if c.Spec.Paused != nil && *c.Spec.Paused {
		return true
	}
	_, ok := c.Annotations[clusterv1.PausedAnnotation]
	return ok
}

// OptedOut tells whether the cluster, or its namespace, says
// fleet.cattle.io/enroll: "false".
func OptedOut(c *clusterv1.Cluster, namespaceLabels map[string]string) bool {
	return c.Labels[EnrollLabel] == "false" || namespaceLabels[EnrollLabel] == "false"
}

// Selected tells whether the cluster is to be enrolled: not opted out, and,
// in opt-in mode, its labels match clusters and its namespace's labels match
// namespaces (a nil selector matches everything).
func Selected(c *clusterv1.Cluster, namespaceLabels map[string]string, clusters, namespaces labels.Selector) bool {
	if OptedOut(c, namespaceLabels) {
		return false
	}
	if clusters != nil && !clusters.Matches(labels.Set(c.Labels)) {
		return false
	}
	return namespaces == nil || namespaces.Matches(labels.Set(namespaceLabels))
}

// DesiredLabels are the labels the fleet Cluster takes from the Cluster API
// Cluster: its labels but those of Cluster API's and fleet's own domains
// (reservedLabel), plus fleet.cattle.io/cluster-class and
// fleet.cattle.io/cluster-class-namespace when it uses a ClusterClass.
func DesiredLabels(c *clusterv1.Cluster) map[string]string {
	out := map[string]string{}
	for k, v := range c.Labels {
		if !reservedLabel(k) {
			out[k] = v
		}
	}
	if class := c.Spec.Topology.ClassRef.Name; class != "" {
		out[ClusterClassLabel] = class
		out[ClusterClassNamespaceLabel] = classNamespace(c)
	}
	return out
}

// SyncLabels brings the labels that came from Cluster API in line with
// desired: keys in managed (what was copied last time) that desired lacks
// are removed, desired ones are set, others are left alone. It returns the
// new labels and the new managed keys, sorted.
func SyncLabels(current map[string]string, managed []string, desired map[string]string) (map[string]string, []string) {
	out := maps.Clone(current)
	if out == nil {
		out = map[string]string{}
	}
	for _, k := range managed {
		if _, ok := desired[k]; !ok {
			delete(out, k)
		}
	}
	maps.Copy(out, desired)
	return out, slices.Sorted(maps.Keys(desired))
}

// ParseManaged reads the managed-labels annotation.
func ParseManaged(annotation string) []string {
	var keys []string
	for k := range strings.SplitSeq(annotation, ",") {
		if k = strings.TrimSpace(k); k != "" {
			keys = append(keys, k)
		}
	}
	return keys
}

// EnrolledFor returns the UID of the Cluster API Cluster a fleet Cluster was
// enrolled for (one of the same name), and whether it was: by its
// CAPIClusterNameAnnotation and CAPIClusterUIDAnnotation, or, for one
// enrolled before those were written, by its controller reference.
func EnrolledFor(fc *fleet.Cluster) (types.UID, bool) {
	if uid := fc.Annotations[CAPIClusterUIDAnnotation]; uid != "" {
		return types.UID(uid), fc.Annotations[CAPIClusterNameAnnotation] == fc.Name
	}
	ref := metav1.GetControllerOf(fc)
	if ref == nil || !isCAPICluster(*ref) || ref.Name != fc.Name {
		return "", false
	}
	return ref.UID, true
}

// WithoutCAPIOwner drops the owner references to Cluster API Clusters: a
// garbage collector would follow them when `clusterctl move` deletes the
// Cluster API Cluster.
func WithoutCAPIOwner(refs []metav1.OwnerReference) []metav1.OwnerReference {
	var out []metav1.OwnerReference
	for _, ref := range refs {
		if !isCAPICluster(ref) {
			out = append(out, ref)
		}
	}
	return out
}

func isCAPICluster(ref metav1.OwnerReference) bool {
	return ref.Kind == "Cluster" && strings.HasPrefix(ref.APIVersion, clusterv1.GroupVersion.Group+"/")
}
