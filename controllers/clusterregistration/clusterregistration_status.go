package clusterregistration

import (
	"fmt"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// nextStatus is a registration's status after a reconcile that ended with
// err; clusterName names the Cluster when this reconcile granted it ("" when
// it did not), and sealed is the credential it sealed to the agent. A status that says the same as old is equal to old, so that
// the caller writes nothing.
func nextStatus(old fleet.ClusterRegistrationStatus, generation int64, clusterName, sealed string, err error, now time.Time) fleet.ClusterRegistrationStatus {
	st := *old.DeepCopy()
	if err == nil && clusterName != "" {
		st.Granted = true
		st.ClusterName = clusterName
		st.SealedCredential = sealed
	}
	if c := acceptedCondition(err, clusterName); c != nil {
		c.ObservedGeneration = generation
		c.LastTransitionTime = metav1.NewTime(now)
		meta.SetStatusCondition(&st.Conditions, *c)
	}
	return st
}

// acceptedCondition is condition Accepted after a reconcile that ended with
// err, or nil when that reconcile decided nothing new about the
// registration and the condition stays as it was:
//   - granted now (clusterName set): True, Granted;
//   - refused (a Stalling error: invalid request, token missing, identity
//     conflict): False with the error's reason, and its message, which says
//     what to do;
//   - a transient error, or a reconcile of a registration granted before:
//     nil. A conflict on the way to a grant is no news, and not worth a
//     write.
func acceptedCondition(err error, clusterName string) *metav1.Condition {
	switch {
	case err == nil && clusterName != "":
		return &metav1.Condition{Type: fleet.ConditionAccepted, Status: metav1.ConditionTrue, Reason: fleet.ReasonGranted,
			Message: fmt.Sprintf("Granted as Cluster %s", clusterName)}
	case outcome.IsStalling(err):
		c := outcome.Condition(fleet.ConditionAccepted, err, fleet.ReasonGranted, "", fleet.ReasonInvalidRegistration)
		return &c
	}
	return nil
}
