package clusterregistrationtoken

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
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

func sameSecond(a, b *metav1.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Unix() == b.Unix()
}
