package capienroll

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// What the manager's Cluster API enrolment (controllers/capi) writes and
// reads on a Cluster API Cluster and its fleet Cluster; the same values as
// its constants (a test holds them equal).
const (
	ConditionFleetAgentReady = "FleetAgentReady"
	EnrollLabel              = "fleet.cattle.io/enroll"
	UnenrolledAnnotation     = "fleet.cattle.io/unenrolled"
	ClusterNameAnnotation    = "fleet.cattle.io/capi-cluster-name"
	ClusterUIDAnnotation     = "fleet.cattle.io/capi-cluster-uid"
)

// Condition is c's FleetAgentReady condition, nil without one.
func Condition(c *clusterv1.Cluster) *metav1.Condition {
	return meta.FindStatusCondition(c.Status.Conditions, ConditionFleetAgentReady)
}

// Enrolled tells whether c's FleetAgentReady is True: its fleet agent
// checks in.
func Enrolled(c *clusterv1.Cluster) bool {
	cond := Condition(c)
	return cond != nil && cond.Status == metav1.ConditionTrue
}

// Initialized tells whether the workload cluster's control plane is
// initialized, as the enrolment reads it.
func Initialized(c *clusterv1.Cluster) bool {
	if p := c.Status.Initialization.ControlPlaneInitialized; p != nil && *p {
		return true
	}
	return meta.IsStatusConditionTrue(c.Status.Conditions, clusterv1.ClusterControlPlaneInitializedCondition)
}

// Paused tells whether Cluster API (and the enrolment) leaves the cluster
// alone.
func Paused(c *clusterv1.Cluster) bool {
	if c.Spec.Paused != nil && *c.Spec.Paused {
		return true
	}
	_, ok := c.Annotations[clusterv1.PausedAnnotation]
	return ok
}

// OptedOut tells whether a person keeps c from being enrolled: its opt-out
// label, or the annotation left when its fleet Cluster was deleted (and
// FleetAgentReady Unenrolled, written for both). The opt-out label on the
// namespace is not seen here; it shows as Unenrolled or no condition.
func OptedOut(c *clusterv1.Cluster) bool {
	if c.Labels[EnrollLabel] == "false" || c.Annotations[UnenrolledAnnotation] != "" {
		return true
	}
	cond := Condition(c)
	return cond != nil && cond.Reason == fleet.ReasonUnenrolled
}

// EnrolledFrom tells whether the fleet Cluster fc was enrolled for the
// Cluster API Cluster c: its annotations name c (a fleet Cluster of the
// same name registered otherwise is not c's).
func EnrolledFrom(fc *fleet.Cluster, c *clusterv1.Cluster) bool {
	if uid := fc.Annotations[ClusterUIDAnnotation]; uid != "" {
		return uid == string(c.UID)
	}
	return fc.Annotations[ClusterNameAnnotation] == c.Name
}

// WhyNot says, for a person, why c is not enrolled: its FleetAgentReady
// condition when it has one, else what keeps the manager from enrolling
// it. It does not look at whether c is enrolled.
func WhyNot(c *clusterv1.Cluster) string {
	cond := Condition(c)
	switch {
	case !c.DeletionTimestamp.IsZero():
		return "It is being deleted; its fleet Cluster goes with it."
	case cond != nil && cond.Message != "":
		return cond.Reason + ": " + cond.Message
	case Paused(c):
		return "It is paused (spec.paused or the cluster.x-k8s.io/paused annotation): the manager leaves it alone until it is resumed."
	case c.Labels[EnrollLabel] == "false":
		return "It is opted out: its label " + EnrollLabel + "=false keeps it from being enrolled; remove the label to enrol it."
	case c.Annotations[UnenrolledAnnotation] != "":
		return "It was un-enrolled (its fleet Cluster was deleted at " + c.Annotations[UnenrolledAnnotation] +
			"): remove the annotation " + UnenrolledAnnotation + " to enrol it again."
	case cond != nil:
		return cond.Reason
	}
	return "The manager has not looked at it: it has no FleetAgentReady condition. Is Cluster API enrolment on in the manager, " +
		"do its opt-in selectors (--capi-cluster-selector, --capi-namespace-selector) leave it out, " +
		"or does its namespace carry " + EnrollLabel + "=false?"
}
