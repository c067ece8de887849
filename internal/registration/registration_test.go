package registration_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/registration"
)

func TestAllowedLabels(t *testing.T) {
	g := NewWithT(t)
	got := registration.AllowedLabels(map[string]string{
		"env":                           "prod",
		"example.com/team":              "a",
		"fleet.cattle.io/cluster":       "other",
		"management.fleet.cattle.io/x":  "y",
		"cluster.x-k8s.io/cluster-name": "z",
		"bad key!":                      "v",
		"ok":                            "bad value!",
	})
	g.Expect(got).To(Equal(map[string]string{"env": "prod", "example.com/team": "a"}))
}

func TestTokenExpiry(t *testing.T) {
	created := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	cases := []struct {
		name string
		ttl  *metav1.Duration
		want *time.Time
	}{
		{name: "no TTL never expires"},
		{name: "a TTL of 0 never expires", ttl: &metav1.Duration{}},
		{name: "creation plus TTL", ttl: &metav1.Duration{Duration: time.Hour}, want: ptr(created.Add(time.Hour))},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			token := &fleet.ClusterRegistrationToken{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created}, Spec: fleet.ClusterRegistrationTokenSpec{TTL: tc.ttl}}
			got := registration.TokenExpiry(token)
			if tc.want == nil {
				g.Expect(got).To(BeNil())
				return
			}
			g.Expect(got.Time).To(Equal(*tc.want))
		})
	}
}

func ptr[T any](v T) *T { return &v }
