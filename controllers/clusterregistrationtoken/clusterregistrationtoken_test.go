package clusterregistrationtoken

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func TestExpiry(t *testing.T) {
	g := NewWithT(t)
	created := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	token := func(ttl *metav1.Duration) *fleet.ClusterRegistrationToken {
		return &fleet.ClusterRegistrationToken{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: created}, Spec: fleet.ClusterRegistrationTokenSpec{TTL: ttl}}
	}
	g.Expect(Expiry(token(nil))).To(BeNil(), "no TTL never expires")
	g.Expect(Expiry(token(&metav1.Duration{}))).To(BeNil(), "a TTL of 0 never expires")
	g.Expect(Expiry(token(&metav1.Duration{Duration: time.Hour})).Time).To(Equal(created.Add(time.Hour)))
}
