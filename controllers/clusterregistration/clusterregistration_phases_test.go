package clusterregistration

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func TestValidate(t *testing.T) {
	valid := func() *fleet.ClusterRegistration {
		return &fleet.ClusterRegistration{
			ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{fleet.RegistrationTokenLabel: "t"}},
			Spec:       fleet.ClusterRegistrationSpec{ClientID: "uid", ClientRandom: "0123456789abcdef"},
		}
	}
	cases := map[string]struct {
		mutate func(*fleet.ClusterRegistration)
		err    string
	}{
		"valid":          {func(*fleet.ClusterRegistration) {}, ""},
		"no client id":   {func(r *fleet.ClusterRegistration) { r.Spec.ClientID = "" }, "spec.clientID"},
		"short random":   {func(r *fleet.ClusterRegistration) { r.Spec.ClientRandom = "abc" }, "spec.clientRandom"},
		"no token label": {func(r *fleet.ClusterRegistration) { r.Labels = nil }, fleet.RegistrationTokenLabel},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			r := valid()
			tc.mutate(r)
			err := Validate(r)
			if tc.err == "" {
				g.Expect(err).NotTo(HaveOccurred())
			} else {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
			}
		})
	}
}
