package registration

import (
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// AllowedLabels drops the labels an agent may not give its Cluster: fleet's
// own (they select what the Cluster receives and who owns it), Cluster
// API's, and any that are not valid label keys or values.
func AllowedLabels(requested map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range requested {
		if strings.Contains(k, "fleet.cattle.io/") || strings.Contains(k, "cluster.x-k8s.io/") {
			continue
		}
		if len(validation.IsQualifiedName(k)) > 0 || len(validation.IsValidLabelValue(v)) > 0 {
			continue
		}
		out[k] = v
	}
	return out
}

// TokenExpiry is the moment a registration token stops working: its
// creation plus its TTL; nil when it never expires.
func TokenExpiry(token *fleet.ClusterRegistrationToken) *metav1.Time {
	if token.Spec.TTL == nil || token.Spec.TTL.Duration <= 0 {
		return nil
	}
	t := metav1.NewTime(token.CreationTimestamp.Add(token.Spec.TTL.Duration))
	return &t
}
