package cleanup

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func TestRegistrationsKeepsTheOneCredentialsHangOn(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 1, 2, 12, 0, 0, 0, time.UTC)
	reg := func(name, cluster string, granted bool, age time.Duration) fleet.ClusterRegistration {
		return fleet.ClusterRegistration{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: name, CreationTimestamp: metav1.NewTime(now.Add(-age))},
			Status: fleet.ClusterRegistrationStatus{Granted: granted, ClusterName: cluster}}
	}
	regs := []fleet.ClusterRegistration{
		reg("a-old", "a", true, 3*time.Hour),
		reg("a-new", "a", true, time.Hour),
		reg("b-only", "b", true, 5*time.Hour),
		reg("gone", "deleted", true, time.Hour),
		reg("pending-old", "", false, 2*time.Hour),
		reg("pending-new", "", false, time.Minute),
	}
	clusters := []fleet.Cluster{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "a"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "b"}},
	}
	got := map[string]string{}
	for _, r := range Registrations(regs, clusters, now, time.Hour) {
		got[r.Registration.Name] = r.Why
	}
	g.Expect(got).To(Equal(map[string]string{
		"a-old":       "done: superseded by a-new",
		"gone":        "orphaned: Cluster fleet-default/deleted no longer exists",
		"pending-old": "never granted, requested 2h0m0s ago",
	}))
}
