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
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/checkin"
)

// renew writes the agent's check-in Lease as the agent's heartbeat does.
func renew(ctx context.Context, clusterNS string) error {
	now, holder := metav1.NowMicro(), "fleet-system/fleet-agent"
	return checkin.Write(ctx, env.Client, clusterNS,
		coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &now},
		map[string]string{fleet.AgentNamespaceAnnotation: "fleet-system"})
}

// The agent's Lease reaches the Cluster's status at the first check-in; the
// heartbeats after it cost the Cluster no write.
func TestCheckInsFoldedFromTheLease(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := env.CreateNamespace(ctx, "checkin")
	g.Expect(err).NotTo(HaveOccurred())
	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: ns.Name}}
	g.Expect(env.CreateAndWait(ctx, c)).To(Succeed())
	ready(ctx, g, c, metav1.ConditionFalse, fleet.ClusterStateWaitCheckIn)
	got := &fleet.Cluster{}
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
	clusterNS := got.Status.Namespace
	g.Expect(clusterNS).NotTo(BeEmpty())

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
