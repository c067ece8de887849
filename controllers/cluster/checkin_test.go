package cluster_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/cluster"
	"github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/internal/checkin/checkintest"
	"github.com/gitfleet/fleet/internal/conditions"
)

// renew writes the agent's check-in Lease as the agent's heartbeat does.
func renew(ctx context.Context, clusterNS string) error {
	now, holder := metav1.NowMicro(), "fleet-system/fleet-agent"
	return checkin.Write(ctx, env.Client, clusterNS,
		coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &now},
		map[string]string{fleet.AgentNamespaceAnnotation: "fleet-system"})
}

// waitingCluster makes a Cluster in a new workspace namespace and waits for
// the manager to make its cluster namespace and show it waiting for its
// agent's first check-in.
func waitingCluster(ctx context.Context, g *WithT, prefix string) (*fleet.Cluster, string) {
	ns, err := env.CreateNamespace(ctx, prefix)
	g.Expect(err).NotTo(HaveOccurred())
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns.Name}}
	g.Expect(env.CreateAndWait(ctx, c)).To(Succeed())
	ready(ctx, g, c, metav1.ConditionFalse, fleet.ClusterStateWaitCheckIn)
	got := &fleet.Cluster{}
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
	g.Expect(got.Status.Namespace).NotTo(BeEmpty())
	return c, got.Status.Namespace
}

// The agent's Lease reaches the Cluster's status at the first check-in; the
// heartbeats after it cost the Cluster no write.
func TestCheckInsFoldedFromTheLease(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c, clusterNS := waitingCluster(ctx, g, "checkin")
	got := &fleet.Cluster{}

	g.Expect(renew(ctx, clusterNS)).To(Succeed())
	ready(ctx, g, c, metav1.ConditionTrue, fleet.ReasonReady)
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
	g.Expect(got.Status.Agent.LastSeen.IsZero()).To(BeFalse(), "the first check-in is written")
	g.Expect(got.Status.Agent.Namespace).To(Equal("fleet-system"))
	// Whatever the manager wrote after the first check-in settles before
	// the heartbeats are counted.
	var rv string
	g.Eventually(func(g Gomega) {
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
		before := got.ResourceVersion
		g.Consistently(func(g Gomega) {
			now := &fleet.Cluster{}
			g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), now)).To(Succeed())
			g.Expect(now.ResourceVersion).To(Equal(before))
		}).WithTimeout(time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
		rv = before
	}).WithTimeout(timeout).Should(Succeed(), "the Cluster settled")

	// Heartbeats: the Lease is renewed, the Cluster is not written.
	lease := &coordinationv1.Lease{}
	key := types.NamespacedName{Namespace: clusterNS, Name: fleet.AgentLeaseName}
	g.Expect(env.Get(ctx, key, lease)).To(Succeed())
	renewals := lease.ResourceVersion
	g.Consistently(func(g Gomega) {
		g.Expect(renew(ctx, clusterNS)).To(Succeed())
		now := &fleet.Cluster{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), now)).To(Succeed())
		g.Expect(now.ResourceVersion).To(Equal(rv), "a heartbeat wrote the Cluster")
	}).WithTimeout(3 * time.Second).WithPolling(200 * time.Millisecond).Should(Succeed())
	g.Expect(env.Get(ctx, key, lease)).To(Succeed())
	g.Expect(lease.ResourceVersion).NotTo(Equal(renewals), "the Lease was renewed meanwhile")
}

// Deleting a Cluster deletes its agents' ServiceAccounts (and their right to
// renew their tokens), which live in the agents' namespace, and nobody
// else's.
func TestDeletingAClusterRevokesItsAgents(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := env.CreateNamespace(ctx, "revoke")
	g.Expect(err).NotTo(HaveOccurred())
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns.Name}}
	g.Expect(env.CreateAndWait(ctx, c)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &fleet.Cluster{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
		g.Expect(got.Finalizers).To(ContainElement(fleet.ClusterFinalizer))
	}).WithTimeout(timeout).Should(Succeed())

	labelsOf := func(cluster string) map[string]string {
		return map[string]string{fleet.ManagedLabel: "true", fleet.ClusterLabel: cluster, fleet.ClusterNamespaceLabel: ns.Name}
	}
	objects := func(name, cluster string) []client.Object {
		meta := metav1.ObjectMeta{Name: name, Namespace: agentNS, Labels: labelsOf(cluster)}
		return []client.Object{
			&corev1.ServiceAccount{ObjectMeta: meta},
			&rbacv1.Role{ObjectMeta: meta},
			&rbacv1.RoleBinding{ObjectMeta: meta, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name}},
		}
	}
	mine, theirs := objects(ns.Name+"-edge-agent", "edge"), objects(ns.Name+"-other-agent", "other")
	for _, o := range append(append([]client.Object{}, mine...), theirs...) {
		g.Expect(env.Create(ctx, o)).To(Succeed())
	}

	g.Expect(env.Delete(ctx, c)).To(Succeed())
	for _, o := range mine {
		g.Eventually(func() bool {
			return apierrors.IsNotFound(env.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object)))
		}).WithTimeout(timeout).Should(BeTrue(), "%T %s deleted with its Cluster", o, o.GetName())
	}
	for _, o := range theirs {
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object))).To(Succeed(), "%T %s of another Cluster stays", o, o.GetName())
	}
}

// A cache that lags behind the agent's last check-in does not show its
// Cluster Offline: the Lease is read again from the API server before the
// alarm is raised. Without that read, the same lag would.
func TestOfflineConfirmedPastTheCache(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	c, clusterNS := waitingCluster(ctx, g, "confirm")
	got := &fleet.Cluster{}

	// The first check-in two minutes ago is written into lastSeen; the
	// renewal now is not (it is within the manager's lastSeen refresh):
	// only the Lease says the agent is alive.
	holder := "fleet-system/fleet-agent"
	first := metav1.NewMicroTime(time.Now().Add(-2 * time.Minute))
	g.Expect(checkin.Write(ctx, env.Client, clusterNS, coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &first}, nil)).To(Succeed())
	ready(ctx, g, c, metav1.ConditionTrue, fleet.ReasonReady)
	g.Expect(renew(ctx, clusterNS)).To(Succeed())

	// A reconciler whose cache still has the first check-in, with an
	// Offline limit of 30s: the cached Lease says two minutes of silence.
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(c)}
	lagging := checkintest.Lagging{Client: env.Client, Lag: 2 * time.Minute}
	state := func() string {
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
		return got.Status.Display.State
	}
	r := &cluster.Reconciler{Client: lagging, APIReader: env.Client, OfflineAfter: 30 * time.Second}
	_, err := r.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(state()).NotTo(Equal(fleet.ClusterStateOffline), "the API server has the renewal")
	g.Expect(conditions.IsTrue(got, fleet.ConditionReady)).To(BeTrue())

	// The control: the same lag, no read past it.
	blind := &cluster.Reconciler{Client: lagging, OfflineAfter: 30 * time.Second}
	_, err = blind.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(state()).To(Equal(fleet.ClusterStateOffline), "the lag alone raises the alarm")
}
