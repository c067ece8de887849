package clusterregistration

import (
	"errors"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

func TestNextStatus(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	earlier := metav1.NewTime(now.Add(-time.Hour))
	accepted := func(status metav1.ConditionStatus, reason, message string, at metav1.Time) []metav1.Condition {
		return []metav1.Condition{{Type: fleet.ConditionAccepted, Status: status, Reason: reason, Message: message,
			ObservedGeneration: 1, LastTransitionTime: at}}
	}
	noToken := outcome.Stallf(fleet.ReasonTokenNotFound, "registration token ns/t does not exist")
	waiting := outcome.Waitf(fleet.ReasonPendingBound, time.Second, "10 credentials wait")
	cases := []struct {
		name        string
		old         fleet.ClusterRegistrationStatus
		clusterName string
		sealed      string
		err         error
		want        fleet.ClusterRegistrationStatus
	}{{
		name:        "granted",
		clusterName: "c-1", sealed: "v1.sealed", want: fleet.ClusterRegistrationStatus{Granted: true, ClusterName: "c-1", SealedCredential: "v1.sealed",
			Conditions: accepted(metav1.ConditionTrue, fleet.ReasonGranted, "Granted as Cluster c-1", metav1.NewTime(now))},
	}, {
		name:        "granted after an earlier version held it back",
		old:         fleet.ClusterRegistrationStatus{Conditions: accepted(metav1.ConditionUnknown, fleet.ReasonPendingBound, "10 credentials wait", earlier)},
		clusterName: "c-1", want: fleet.ClusterRegistrationStatus{Granted: true, ClusterName: "c-1",
			Conditions: accepted(metav1.ConditionTrue, fleet.ReasonGranted, "Granted as Cluster c-1", metav1.NewTime(now))},
	}, {
		name: "refused: the token is missing",
		err:  noToken,
		want: fleet.ClusterRegistrationStatus{Conditions: accepted(metav1.ConditionFalse, fleet.ReasonTokenNotFound, noToken.Error(), metav1.NewTime(now))},
	}, {
		name: "refused again the same way: no change",
		old:  fleet.ClusterRegistrationStatus{Conditions: accepted(metav1.ConditionFalse, fleet.ReasonTokenNotFound, noToken.Error(), earlier)},
		err:  noToken,
		want: fleet.ClusterRegistrationStatus{Conditions: accepted(metav1.ConditionFalse, fleet.ReasonTokenNotFound, noToken.Error(), earlier)},
	}, {
		name: "refused for another reason: the transition time stays",
		old:  fleet.ClusterRegistrationStatus{Conditions: accepted(metav1.ConditionFalse, fleet.ReasonTokenNotFound, noToken.Error(), earlier)},
		err:  outcome.Stallf(fleet.ReasonIdentityConflict, "taken"),
		want: fleet.ClusterRegistrationStatus{Conditions: accepted(metav1.ConditionFalse, fleet.ReasonIdentityConflict, "taken", earlier)},
	}, {
		name: "a wrapped refusal keeps its reason",
		err:  fmt.Errorf("validate: %w", outcome.Stallf(fleet.ReasonInvalidRegistration, "bad")),
		want: fleet.ClusterRegistrationStatus{Conditions: accepted(metav1.ConditionFalse, fleet.ReasonInvalidRegistration, "validate: bad", metav1.NewTime(now))},
	}, {
		name: "waiting, which grants no longer do: nothing new",
		err:  waiting,
		want: fleet.ClusterRegistrationStatus{},
	}, {
		name: "a transient error says nothing new",
		old:  fleet.ClusterRegistrationStatus{Conditions: accepted(metav1.ConditionUnknown, fleet.ReasonPendingBound, "10 credentials wait", earlier)},
		err:  errors.New("conflict"),
		want: fleet.ClusterRegistrationStatus{Conditions: accepted(metav1.ConditionUnknown, fleet.ReasonPendingBound, "10 credentials wait", earlier)},
	}, {
		name: "a registration granted before, its secret expired: no change",
		old: fleet.ClusterRegistrationStatus{Granted: true, ClusterName: "c-1",
			Conditions: accepted(metav1.ConditionTrue, fleet.ReasonGranted, "Granted as Cluster c-1", earlier)},
		want: fleet.ClusterRegistrationStatus{Granted: true, ClusterName: "c-1",
			Conditions: accepted(metav1.ConditionTrue, fleet.ReasonGranted, "Granted as Cluster c-1", earlier)},
	}, {
		name: "granted by an earlier version, without conditions: left alone",
		old:  fleet.ClusterRegistrationStatus{Granted: true, ClusterName: "c-1"},
		want: fleet.ClusterRegistrationStatus{Granted: true, ClusterName: "c-1"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			old := tc.old.DeepCopy()
			got := nextStatus(tc.old, 1, tc.clusterName, tc.sealed, tc.err, now)
			g.Expect(got).To(Equal(tc.want))
			g.Expect(tc.old).To(Equal(*old), "the old status is not changed")
			g.Expect(equality.Semantic.DeepEqual(got, tc.old)).To(Equal(equality.Semantic.DeepEqual(tc.want, tc.old)), "a write only when something changed")
		})
	}
}
