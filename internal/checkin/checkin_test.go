package checkin

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func TestLast(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	lease := func(renewed time.Time) *coordinationv1.Lease {
		return &coordinationv1.Lease{Spec: coordinationv1.LeaseSpec{RenewTime: &metav1.MicroTime{Time: renewed}}}
	}
	seen := func(at time.Time) *fleet.Cluster {
		c := &fleet.Cluster{}
		c.Status.Agent.LastSeen = metav1.NewTime(at)
		return c
	}
	for name, tc := range map[string]struct {
		cluster *fleet.Cluster
		lease   *coordinationv1.Lease
		want    time.Time
	}{
		"never checked in":                                    {seen(time.Time{}), nil, time.Time{}},
		"a Lease never renewed":                               {seen(time.Time{}), &coordinationv1.Lease{}, time.Time{}},
		"the Lease, lastSeen not refreshed since":             {seen(t0), lease(t0.Add(time.Minute)), t0.Add(time.Minute)},
		"lastSeen written later (an earlier agent, an admin)": {seen(t0.Add(time.Hour)), lease(t0), t0.Add(time.Hour)},
		"no Lease: lastSeen":                                  {seen(t0), nil, t0},
	} {
		t.Run(name, func(t *testing.T) {
			if got := Last(tc.cluster, tc.lease); !got.Equal(tc.want) {
				t.Fatalf("Last = %s, want %s", got, tc.want)
			}
		})
	}
}
