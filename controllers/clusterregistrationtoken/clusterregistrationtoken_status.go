package clusterregistrationtoken

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// status is a token's status after a reconcile: secretName is the values
// Secret when the reconcile has it in place ("" when it failed before: the
// status keeps naming the last one), expires when the token stops working.
// An expiry equal to the stored one to the second is kept as stored: the API
// keeps seconds only, and a TTL with a fraction of a second would otherwise
// write the status on every reconcile.
func status(old fleet.ClusterRegistrationTokenStatus, secretName string, expires *metav1.Time) fleet.ClusterRegistrationTokenStatus {
	st := *old.DeepCopy()
	if secretName != "" {
		st.SecretName = secretName
	}
	if !sameSecond(st.Expires, expires) {
		st.Expires = expires.DeepCopy()
	}
	return st
}

// withIssued sets condition Issued after a reconcile that ended with err:
// True once the values are in place, False with the reason when the token
// cannot be issued (a Stalling error, e.g. NotOwned); a transient error
// leaves it as it was. The transition time changes only with the status.
func withIssued(st fleet.ClusterRegistrationTokenStatus, generation int64, err error, now time.Time) fleet.ClusterRegistrationTokenStatus {
	var c metav1.Condition
	switch {
	case err == nil && st.SecretName != "":
		c = metav1.Condition{Type: fleet.ConditionIssued, Status: metav1.ConditionTrue, Reason: fleet.ReasonIssued,
			Message: "The agent values are in Secret " + st.SecretName}
	case outcome.IsStalling(err):
		c = outcome.Condition(fleet.ConditionIssued, err, fleet.ReasonIssued, "", fleet.ReasonError)
	default:
		return st
	}
	c.ObservedGeneration = generation
	c.LastTransitionTime = metav1.NewTime(now)
	meta.SetStatusCondition(&st.Conditions, c)
	return st
}

func sameSecond(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Unix() == b.Unix()
}
