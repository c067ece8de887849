package registration

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/names"
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

// Labels on what a grant writes: the registration it is for, and so the
// token that registration was made with (fleet.RegistrationTokenLabel, in
// the registration's namespace). The credential secret and the RBAC letting
// the token read it carry all three, so that revoking a token takes back
// every credential of its waiting for the agent.
const (
	RequestLabel          = "fleet.cattle.io/registration"
	RequestNamespaceLabel = "fleet.cattle.io/registration-namespace"
)

// TokenBoundTo tells whether token was issued for the one Cluster named
// cluster in its namespace: by `fleet install agent-token --cluster`
// (label fleet.RegistrationTokenClusterLabel), or by the import controller,
// which makes one token per Cluster under a name derived from it.
func TokenBoundTo(token *fleet.ClusterRegistrationToken, cluster string) bool {
	if bound, ok := token.Labels[fleet.RegistrationTokenClusterLabel]; ok {
		return bound == cluster
	}
	return token.Name == names.ImportToken(cluster)
}

// BoundCluster is the Cluster a token was issued for by `fleet install
// agent-token --cluster`, "" for a token that may register any cluster.
func BoundCluster(token *fleet.ClusterRegistrationToken) string {
	return token.Labels[fleet.RegistrationTokenClusterLabel]
}

// RenewalHash is what an agent writes onto its check-in Lease (annotation
// fleet.RenewalHashAnnotation; agents of earlier versions wrote it into
// their Cluster's status.agent.renewalHash), with its current credential,
// before it registers again with clientRandom: the proof that the new
// registration is its own.
func RenewalHash(clientRandom string) string {
	sum := sha256.Sum256([]byte(clientRandom))
	return hex.EncodeToString(sum[:])
}
