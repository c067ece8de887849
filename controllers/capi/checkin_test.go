package capi_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/capi"
	"github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/internal/checkin/checkintest"
	"github.com/gitfleet/fleet/internal/conditions"
)

// A cache that lags behind the agent's check-ins does not turn
// FleetAgentReady False: the Lease is read again from the API server first.
// Without that read, the same lag would.
func TestFleetAgentReadyConfirmedPastTheCache(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := env.CreateNamespace(ctx, "capi-lag")
	g.Expect(err).NotTo(HaveOccurred())
	c := capiCluster(t, ns.Name, "gamma", true, nil)
	kubeconfigSecret(t, ns.Name, "gamma")
	g.Eventually(fleetCluster(ctx, ns.Name, "gamma")).WithTimeout(20*time.Second).Should(HaveField("Status.Namespace", Not(BeEmpty())),
		"the fleet Cluster and its namespace")
	fc, err := fleetCluster(ctx, ns.Name, "gamma")()
	g.Expect(err).NotTo(HaveOccurred())

	// Installed, and the agent checks in every half second.
	setImported(t, fc, metav1.ConditionTrue, fleet.ReasonAgentRegistered, "the agent registered")
	renewing, stop := context.WithCancel(ctx)
	defer stop()
	beat := func() error {
		now, seconds, holder := metav1.NowMicro(), int32(1), "fleet-agent"
		return checkin.Write(ctx, env.Client, fc.Status.Namespace,
			coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: &now}, nil)
	}
	g.Expect(beat()).To(Succeed())
	go func() {
		for {
			select {
			case <-renewing.Done():
				return
			case <-time.After(500 * time.Millisecond):
				_ = beat()
			}
		}
	}()
	// True, as the manager's cache has it too (the copy below reads it
	// there: a cache behind the condition would make it news again).
	g.Eventually(func(g Gomega) *metav1.Condition {
		cached := &clusterv1.Cluster{}
		g.Expect(reconciler.Client.Get(ctx, client.ObjectKeyFromObject(c), cached)).To(Succeed())
		return conditions.Get(cached, capi.ConditionFleetAgentReady)
	}).WithTimeout(20 * time.Second).Should(haveReason(metav1.ConditionTrue, fleet.ReasonRegistered))

	// A copy of the manager's reconciler whose cache has the agent's
	// renewals an hour late, with the manager's API reader.
	lagging := checkintest.Lagging{Client: reconciler.Client, Lag: time.Hour}
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}
	confirming := *reconciler
	confirming.Client = lagging
	seen := events.NewFakeRecorder(10)
	confirming.Recorder = seen
	_, err = confirming.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Consistently(seen.Events).ShouldNot(Receive(), "FleetAgentReady did not change: the API server has the renewals")
	g.Expect(agentReady(ctx, c)(g)).To(haveReason(metav1.ConditionTrue, fleet.ReasonRegistered))

	// The control: the same lag, and a reader past the cache that lags too.
	blind := confirming
	blind.APIReader = checkintest.Lagging{Client: env.Client, Lag: time.Hour}
	_, err = blind.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(seen.Events).To(Receive(ContainSubstring(fleet.ReasonAgentSilent)), "the lag alone turns FleetAgentReady False")
}
