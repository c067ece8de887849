package clusterimport_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/clusterimport"
	"github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/internal/checkin/checkintest"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/outcome"
)

// An agent that checks in is not restarted as stale on the word of a cache
// that lags behind its Lease: the Lease is read again from the API server
// first. Without that read, the same lag restarts it.
func TestStaleAgentConfirmedPastTheCache(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	// Its own agent namespace downstream: other tests import the same
	// workload cluster into fleet-system.
	const agentNS = "fleet-lagging"
	downstream, err := workload.Client(nil)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_ = downstream.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: agentNS}})
	})
	ns, err := env.CreateNamespace(ctx, "import-lag")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(env.Create(ctx, kubeconfigSecret(t, ns.Name, "workload-kubeconfig", nil))).To(Succeed())
	cluster := importCluster(ns.Name, "lagging", "workload-kubeconfig")
	cluster.Spec.AgentNamespace = agentNS
	g.Expect(env.CreateAndWait(ctx, cluster)).To(Succeed())
	g.Eventually(imported(ctx, cluster)).WithTimeout(30*time.Second).
		Should(haveReason(metav1.ConditionTrue, fleet.ReasonApplied), "the agent installed")

	// The agent checks in every 200ms through its Lease.
	clusterNS := names.ClusterNamespaceFor(cluster.Namespace, cluster.Name, "")
	g.Expect(env.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterNS}})).To(Succeed())
	renewing, stop := context.WithCancel(ctx)
	defer stop()
	beat := func() error {
		now, holder := metav1.NowMicro(), "fleet-agent"
		return checkin.Write(ctx, env.Client, clusterNS, coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &now}, nil)
	}
	g.Expect(beat()).To(Succeed())
	go func() {
		for {
			select {
			case <-renewing.Done():
				return
			case <-time.After(200 * time.Millisecond):
				_ = beat()
			}
		}
	}()

	// A copy of the manager's import controller that takes an agent for
	// stale after a second of silence, whose cache has the agent's
	// renewals an hour late; the install is over a second old.
	deployment := types.NamespacedName{Namespace: agentNS, Name: fleet.AgentName}
	installed := &appsv1.Deployment{}
	g.Expect(downstream.Get(ctx, deployment, installed)).To(Succeed())
	lagging := checkintest.Lagging{Client: importer.Client, Lag: time.Hour}
	confirming := *importer
	confirming.Client, confirming.StaleAfter = lagging, time.Second
	time.Sleep(2 * time.Second)
	req := ctrl.Request{NamespacedName: client.ObjectKeyFromObject(cluster)}
	_, err = confirming.Reconcile(ctx, req)
	g.Expect(err).NotTo(HaveOccurred())
	got := &appsv1.Deployment{}
	g.Expect(downstream.Get(ctx, deployment, got)).To(Succeed())
	g.Expect(got.Generation).To(Equal(installed.Generation), "the agent was not restarted: the API server has its renewals")
	g.Expect(got.Spec.Template.Annotations).To(Equal(installed.Spec.Template.Annotations))

	// The control: the same lag, and a reader past the cache that lags
	// too (it reads the kubeconfig Secret as the manager's does).
	blind := confirming
	blind.APIReader = checkintest.Lagging{Client: env.Client, Lag: time.Hour}
	// A restart hands the agent a new import token, waiting for the old
	// one to go: reconciled until it is done.
	g.Eventually(func(g Gomega) int64 {
		_, err := blind.Reconcile(ctx, req)
		g.Expect(err == nil || outcome.IsWaiting(err)).To(BeTrue(), "%v", err)
		g.Expect(downstream.Get(ctx, deployment, got)).To(Succeed())
		return got.Generation
	}).WithTimeout(20*time.Second).Should(BeNumerically(">", installed.Generation), "the lag alone restarts the agent")
	g.Expect(got.Spec.Template.Annotations[clusterimport.RestartedAtAnnotation]).
		NotTo(Equal(installed.Spec.Template.Annotations[clusterimport.RestartedAtAnnotation]))
}
