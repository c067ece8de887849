package registration

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"strings"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// TokenProof is what an agent registering with the registration token whose
// value is bearer writes in its request's RegistrationProofAnnotation: a
// keyed hash (HMAC-SHA256, keyed by the token's value) of the request's
// namespace, name, the token it names, its identity and its public key.
//
// RBAC lets every token of a namespace create registrations there with any
// labels, so the label naming the token proves nothing by itself; a token
// bound to a Cluster may take that Cluster over. The proof binds the request
// to the value of the token it names, which only the holders of that token
// and the manager know. It binds the request's identity and key too, so a
// proof seen in one request is worth nothing in another.
func TokenProof(bearer string, reg *fleet.ClusterRegistration) string {
	mac := hmac.New(sha256.New, []byte(bearer))
	mac.Write([]byte(strings.Join([]string{
		"fleet registration proof v1", reg.Namespace, reg.Name, reg.Labels[fleet.RegistrationTokenLabel],
		reg.Spec.ClientID, reg.Spec.ClientRandom, reg.Spec.PublicKey,
	}, "\x00")))
	return base64.RawStdEncoding.EncodeToString(mac.Sum(nil))
}

// Prove sets reg's proof for the token value bearer.
func Prove(bearer string, reg *fleet.ClusterRegistration) {
	if reg.Annotations == nil {
		reg.Annotations = map[string]string{}
	}
	reg.Annotations[fleet.RegistrationProofAnnotation] = TokenProof(bearer, reg)
}

// Proven tells whether reg carries the proof for the token value bearer.
func Proven(bearer string, reg *fleet.ClusterRegistration) bool {
	got := reg.Annotations[fleet.RegistrationProofAnnotation]
	return bearer != "" && got != "" && hmac.Equal([]byte(got), []byte(TokenProof(bearer, reg)))
}
