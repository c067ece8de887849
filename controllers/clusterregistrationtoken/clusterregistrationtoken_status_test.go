package clusterregistrationtoken

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

func TestStatus(t *testing.T) {
	at := func(s string) *metav1.Time {
		tm, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		mt := metav1.NewTime(tm)
		return &mt
	}
	cases := []struct {
		name       string
		old        fleet.ClusterRegistrationTokenStatus
		secretName string
		expires    *metav1.Time
		want       fleet.ClusterRegistrationTokenStatus
	}{{
		name:       "first reconcile",
		secretName: "t-token", expires: at("2026-01-01T01:00:00Z"),
		want: fleet.ClusterRegistrationTokenStatus{SecretName: "t-token", Expires: at("2026-01-01T01:00:00Z")},
	}, {
		name:       "never expires",
		secretName: "t-token",
		want:       fleet.ClusterRegistrationTokenStatus{SecretName: "t-token"},
	}, {
		name:       "the secret failed: the last one stays named",
		old:        fleet.ClusterRegistrationTokenStatus{SecretName: "t-token"},
		secretName: "", expires: at("2026-01-01T01:00:00Z"),
		want: fleet.ClusterRegistrationTokenStatus{SecretName: "t-token", Expires: at("2026-01-01T01:00:00Z")},
	}, {
		name:       "the same second is no change",
		old:        fleet.ClusterRegistrationTokenStatus{SecretName: "t-token", Expires: at("2026-01-01T01:00:00Z")},
		secretName: "t-token", expires: at("2026-01-01T01:00:00.5Z"),
		want: fleet.ClusterRegistrationTokenStatus{SecretName: "t-token", Expires: at("2026-01-01T01:00:00Z")},
	}, {
		name:       "a TTL removed",
		old:        fleet.ClusterRegistrationTokenStatus{SecretName: "t-token", Expires: at("2026-01-01T01:00:00Z")},
		secretName: "t-token",
		want:       fleet.ClusterRegistrationTokenStatus{SecretName: "t-token"},
	}, {
		name:       "a TTL changed",
		old:        fleet.ClusterRegistrationTokenStatus{SecretName: "t-token", Expires: at("2026-01-01T01:00:00Z")},
		secretName: "t-token", expires: at("2026-01-01T02:00:00Z"),
		want: fleet.ClusterRegistrationTokenStatus{SecretName: "t-token", Expires: at("2026-01-01T02:00:00Z")},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := status(tc.old, tc.secretName, tc.expires)
			g.Expect(got.SecretName).To(Equal(tc.want.SecretName))
			if tc.want.Expires == nil {
				g.Expect(got.Expires).To(BeNil())
				return
			}
			g.Expect(got.Expires).NotTo(BeNil())
			g.Expect(got.Expires.Time.Equal(tc.want.Expires.Time)).To(BeTrue(), "expires %s, want %s", got.Expires, tc.want.Expires)
		})
	}
}

func TestWithIssued(t *testing.T) {
	g := NewWithT(t)
	now := time.Now()
	st := withIssued(fleet.ClusterRegistrationTokenStatus{}, 1, outcome.Stallf(fleet.ReasonNotOwned, "ServiceAccount ns/ci-bot exists"), now)
	g.Expect(st.Conditions).To(ConsistOf(And(HaveField("Type", fleet.ConditionIssued), HaveField("Status", metav1.ConditionFalse),
		HaveField("Reason", fleet.ReasonNotOwned), HaveField("Message", ContainSubstring("ci-bot")))))
	g.Expect(withIssued(st, 1, errors.New("conflict"), now)).To(Equal(st), "a transient error is no news")
	st = withIssued(fleet.ClusterRegistrationTokenStatus{SecretName: "t-token"}, 1, nil, now)
	g.Expect(st.Conditions).To(ConsistOf(And(HaveField("Status", metav1.ConditionTrue), HaveField("Reason", fleet.ReasonIssued))))
}
