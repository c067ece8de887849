package capi_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/capi"
	"github.com/gitfleet/fleet/controllers/cluster"
	"github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/test/envtest"
)

var env *envtest.Environment

// reconciler is the manager's: a test may run a copy of it by hand.
var reconciler *capi.Reconciler

// staleAfter is how long FleetAgentReady stays True after a check-in here.
const staleAfter = 4 * time.Second

func TestMain(m *testing.M) {
	os.Exit(envtest.Run(context.Background(), envtest.RunInput{
		M:    m,
		Name: "capi",
		CAPI: true,
		// The cluster controller too: what deleting a fleet Cluster deletes
		// (its namespace and BundleDeployments) is what a move must keep.
		SetupReconcilers: func(ctx context.Context, mgr ctrl.Manager) error {
			if err := (&cluster.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
				return err
			}
			// Check-ins grow stale in seconds here, not minutes.
			// ClusterGroups per ClusterClass, as Fleet's add-on provider keeps them when asked.
			reconciler = &capi.Reconciler{Client: mgr.GetClient(), StaleAfter: staleAfter, ClassGroups: true}
			return reconciler.SetupWithManager(ctx, mgr)
		},
		SetupEnv: func(e *envtest.Environment) { env = e },
	}))
}

// capiCluster creates a Cluster API Cluster, its control plane initialized
// or not, as Cluster API's controllers would leave it.
func capiCluster(t *testing.T, namespace, name string, initialized bool, mutate func(*clusterv1.Cluster)) *clusterv1.Cluster {
	t.Helper()
	g := NewWithT(t)
	c := &clusterv1.Cluster{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: map[string]string{"env": "dev"}},
		Spec:       clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 6443}},
	}
	if mutate != nil {
		mutate(c)
	}
	g.Expect(env.CreateAndWait(t.Context(), c)).To(Succeed())
	if initialized {
		initialize(t, c)
	}
	return c
}

// initialize marks the control plane initialized, as Cluster API does.
func initialize(t *testing.T, c *clusterv1.Cluster) {
	t.Helper()
	patch := client.RawPatch(types.MergePatchType, []byte(`{"status":{"initialization":{"controlPlaneInitialized":true}}}`))
	NewWithT(t).Expect(env.Status().Patch(t.Context(), c, patch)).To(Succeed())
}

// kubeconfigSecret writes <name>-kubeconfig as Cluster API does. Its
// content does not matter here: no import controller reads it.
func kubeconfigSecret(t *testing.T, namespace, name string) {
	t.Helper()
	s := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: capi.KubeconfigSecretName(name),
			Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
		Type: clusterv1.ClusterSecretType,
		Data: map[string][]byte{fleet.KubeConfigSecretValueKey: []byte("kubeconfig")},
	}
	NewWithT(t).Expect(env.Create(t.Context(), s)).To(Succeed())
}

func fleetCluster(ctx context.Context, namespace, name string) func() (*fleet.Cluster, error) {
	return func() (*fleet.Cluster, error) {
		c := &fleet.Cluster{}
		return c, env.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, c)
	}
}

func notFound(ctx context.Context, obj client.Object) func() bool {
	return func() bool {
		return apierrors.IsNotFound(env.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object)))
	}
}

// agentReady returns FleetAgentReady of a Cluster API Cluster, nil when it
// has none.
func agentReady(ctx context.Context, c *clusterv1.Cluster) func(g Gomega) *metav1.Condition {
	return func(g Gomega) *metav1.Condition {
		got := &clusterv1.Cluster{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
		return conditions.Get(got, capi.ConditionFleetAgentReady)
	}
}

func haveReason(status metav1.ConditionStatus, reason string) OmegaMatcher {
	return And(Not(BeNil()), HaveField("Status", status), HaveField("Reason", reason))
}

// setImported writes the fleet Cluster's Imported condition as the import
// controller does, under its field owner.
func setImported(t *testing.T, fc *fleet.Cluster, status metav1.ConditionStatus, reason, message string) {
	t.Helper()
	cond := metav1.Condition{Type: fleet.ConditionImported, Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.Now()}
	NewWithT(t).Expect(conditions.ApplyStatus(t.Context(), env.Client, fleet.GroupVersion.WithKind("Cluster"), client.ObjectKeyFromObject(fc),
		map[string]any{"conditions": []metav1.Condition{cond}}, "fleet-clusterimport")).To(Succeed())
}

func TestEnrollsAnInitializedClusterWithItsKubeconfigSecret(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := env.CreateNamespace(ctx, "capi")
	g.Expect(err).NotTo(HaveOccurred())
	c := capiCluster(t, ns.Name, "alpha", false, func(c *clusterv1.Cluster) {
		c.Spec.Topology = clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: "quick-start"}, Version: "v1.36.0"}
	})
	kubeconfigSecret(t, ns.Name, "alpha")

	g.Eventually(agentReady(ctx, c)).WithTimeout(20 * time.Second).Should(And(
		haveReason(metav1.ConditionFalse, fleet.ReasonWaitingForControlPlane),
		HaveField("Message", "waiting for the control plane to be initialized")))
	g.Consistently(notFound(ctx, &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "alpha"}})).
		WithTimeout(time.Second).Should(BeTrue(), "no fleet Cluster before the control plane is initialized")

	initialize(t, c)
	g.Eventually(fleetCluster(ctx, ns.Name, "alpha")).WithTimeout(20*time.Second).Should(And(
		HaveField("Spec.KubeConfigSecret", "alpha-kubeconfig"),
		HaveField("Labels", Equal(map[string]string{"env": "dev", capi.ClusterClassLabel: "quick-start", capi.ClusterClassNamespaceLabel: ns.Name})),
	), "the fleet Cluster, once the control plane is initialized")
	fc, err := fleetCluster(ctx, ns.Name, "alpha")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(fc.Annotations).To(And(HaveKeyWithValue(capi.CAPIClusterNameAnnotation, "alpha"),
		HaveKeyWithValue(capi.CAPIClusterUIDAnnotation, string(c.UID))), "enrolled for the Cluster API Cluster")
	g.Expect(fc.OwnerReferences).To(BeEmpty(), "no owner reference for a garbage collector to follow when the cluster moves")
	got := &clusterv1.Cluster{}
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
	g.Expect(got.Finalizers).To(ContainElement(fleet.CAPIEnrollmentFinalizer))
	g.Eventually(agentReady(ctx, c)).WithTimeout(20 * time.Second).Should(haveReason(metav1.ConditionFalse, fleet.ReasonInstalling))

	// Before the agent checks in, FleetAgentReady follows the fleet
	// Cluster's Imported condition.
	setImported(t, fc, metav1.ConditionTrue, fleet.ReasonAgentRegistered, "the agent is registered and checks in")
	g.Eventually(agentReady(ctx, c)).WithTimeout(20 * time.Second).Should(And(
		haveReason(metav1.ConditionFalse, fleet.ReasonInstalling), HaveField("Message", "waiting for the fleet agent to check in")))
	setImported(t, fc, metav1.ConditionFalse, fleet.ReasonKubeconfigInvalid, "kubeconfig is not valid YAML")
	g.Eventually(agentReady(ctx, c)).WithTimeout(20 * time.Second).Should(And(
		haveReason(metav1.ConditionFalse, fleet.ReasonFailed), HaveField("Message", "KubeconfigInvalid: kubeconfig is not valid YAML")))

	// Labels follow Cluster API's, removals included.
	patch := client.MergeFrom(got.DeepCopy())
	got.Labels = map[string]string{"env": "prod"}
	g.Expect(env.Patch(ctx, got, patch)).To(Succeed())
	g.Eventually(fleetCluster(ctx, ns.Name, "alpha")).WithTimeout(20 * time.Second).
		Should(HaveField("Labels", HaveKeyWithValue("env", "prod")))

	// Deleting the Cluster API Cluster deletes its fleet Cluster.
	g.Expect(env.Delete(ctx, c)).To(Succeed())
	g.Eventually(notFound(ctx, fc)).WithTimeout(20*time.Second).Should(BeTrue(), "the fleet Cluster deleted")
	g.Eventually(notFound(ctx, c)).WithTimeout(20*time.Second).Should(BeTrue(), "the finalizer removed")
}

// FleetAgentReady follows the agent's check-ins, not the manager's reach into
// the workload cluster: it stays True while the agent renews its Lease even
// though the import controller cannot reach the cluster's API (the kubeconfig
// points at an address nothing answers), and turns False once the agent goes
// silent.
func TestFleetAgentReadyFollowsCheckIns(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := env.CreateNamespace(ctx, "capi-checkin")
	g.Expect(err).NotTo(HaveOccurred())
	c := capiCluster(t, ns.Name, "beta", true, nil)
	kubeconfigSecret(t, ns.Name, "beta")
	g.Eventually(fleetCluster(ctx, ns.Name, "beta")).WithTimeout(20*time.Second).Should(HaveField("Status.Namespace", Not(BeEmpty())),
		"the fleet Cluster and its namespace")
	fc, err := fleetCluster(ctx, ns.Name, "beta")()
	g.Expect(err).NotTo(HaveOccurred())
	// What the import controller writes when the cluster's API does not
	// answer, as during a control plane rollout.
	setImported(t, fc, metav1.ConditionFalse, fleet.ReasonClusterUnreachable,
		"reaching the cluster: dial tcp 192.0.2.1:6443: i/o timeout")
	g.Eventually(agentReady(ctx, c)).WithTimeout(20 * time.Second).Should(haveReason(metav1.ConditionFalse, fleet.ReasonFailed))

	// The agent checks in, as it does, through the Lease in its cluster
	// namespace, every half second.
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
	g.Eventually(agentReady(ctx, c)).WithTimeout(20*time.Second).Should(haveReason(metav1.ConditionTrue, fleet.ReasonRegistered),
		"True once the agent checks in, unreachable or not")
	g.Consistently(agentReady(ctx, c)).WithTimeout(3*staleAfter).WithPolling(200*time.Millisecond).
		Should(haveReason(metav1.ConditionTrue, fleet.ReasonRegistered), "True as long as the agent checks in, for longer than staleAfter")

	stop()
	g.Eventually(agentReady(ctx, c)).WithTimeout(4*staleAfter).Should(And(
		haveReason(metav1.ConditionFalse, fleet.ReasonAgentSilent), HaveField("Message", ContainSubstring("ClusterUnreachable"))),
		"False once the agent stopped checking in")
}

func TestLeavesPausedClustersAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := env.CreateNamespace(ctx, "capi-paused")
	g.Expect(err).NotTo(HaveOccurred())
	c := capiCluster(t, ns.Name, "paused", true, func(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(true) })
	kubeconfigSecret(t, ns.Name, "paused")

	g.Consistently(notFound(ctx, &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "paused"}})).
		WithTimeout(2*time.Second).Should(BeTrue(), "no fleet Cluster for a paused cluster")
	g.Expect(agentReady(ctx, c)(g)).To(BeNil())

	patch := client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":false}}`))
	g.Expect(env.Patch(ctx, c, patch)).To(Succeed())
	g.Eventually(fleetCluster(ctx, ns.Name, "paused")).WithTimeout(20*time.Second).Should(Not(BeNil()), "unpausing enrolls it")
}

func TestLeavesOptedOutClustersAlone(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := env.CreateNamespace(ctx, "capi-optout")
	g.Expect(err).NotTo(HaveOccurred())
	byLabel := capiCluster(t, ns.Name, "by-label", true, func(c *clusterv1.Cluster) { c.Labels[capi.EnrollLabel] = "false" })
	kubeconfigSecret(t, ns.Name, "by-label")

	optedOutNS := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "capi-optout-ns-", Labels: map[string]string{capi.EnrollLabel: "false"}}}
	g.Expect(env.CreateAndWait(ctx, optedOutNS)).To(Succeed())
	byNamespace := capiCluster(t, optedOutNS.Name, "by-namespace", true, nil)
	kubeconfigSecret(t, optedOutNS.Name, "by-namespace")

	g.Consistently(func() bool {
		return notFound(ctx, &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "by-label"}})() &&
			notFound(ctx, &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: optedOutNS.Name, Name: "by-namespace"}})()
	}).WithTimeout(2*time.Second).Should(BeTrue(), "no fleet Cluster for opted-out clusters")
	g.Expect(agentReady(ctx, byLabel)(g)).To(BeNil())
	g.Expect(agentReady(ctx, byNamespace)(g)).To(BeNil())

	// Removing the namespace's label enrolls its clusters; opting an
	// enrolled cluster out un-enrolls it: its fleet Cluster is deleted
	// (the import controller, not running here, removes the agent first).
	patch := client.MergeFrom(optedOutNS.DeepCopy())
	delete(optedOutNS.Labels, capi.EnrollLabel)
	g.Expect(env.Patch(ctx, optedOutNS, patch)).To(Succeed())
	g.Eventually(fleetCluster(ctx, optedOutNS.Name, "by-namespace")).WithTimeout(20 * time.Second).Should(Not(BeNil()))
	g.Eventually(agentReady(ctx, byNamespace)).WithTimeout(20 * time.Second).Should(haveReason(metav1.ConditionFalse, fleet.ReasonInstalling))
	fc, err := fleetCluster(ctx, optedOutNS.Name, "by-namespace")()
	g.Expect(err).NotTo(HaveOccurred())

	got := &clusterv1.Cluster{}
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(byNamespace), got)).To(Succeed())
	clusterPatch := client.MergeFrom(got.DeepCopy())
	got.Labels[capi.EnrollLabel] = "false"
	g.Expect(env.Patch(ctx, got, clusterPatch)).To(Succeed())
	g.Eventually(func(g Gomega) []string {
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(got), got)).To(Succeed())
		return got.Finalizers
	}).WithTimeout(20*time.Second).ShouldNot(ContainElement(fleet.CAPIEnrollmentFinalizer), "released")
	g.Eventually(agentReady(ctx, byNamespace)).WithTimeout(20*time.Second).Should(BeNil(), "FleetAgentReady removed")
	g.Eventually(notFound(ctx, fc)).WithTimeout(20*time.Second).Should(BeTrue(), "the fleet Cluster deleted")

	// Opting in again enrolls it anew.
	clusterPatch = client.MergeFrom(got.DeepCopy())
	delete(got.Labels, capi.EnrollLabel)
	g.Expect(env.Patch(ctx, got, clusterPatch)).To(Succeed())
	g.Eventually(func(g Gomega) types.UID {
		fc, err := fleetCluster(ctx, optedOutNS.Name, "by-namespace")()
		g.Expect(err).NotTo(HaveOccurred())
		return fc.UID
	}).WithTimeout(20*time.Second).ShouldNot(Equal(fc.UID), "a new fleet Cluster")
}

func TestNameTakenByAnotherFleetClusterFails(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := env.CreateNamespace(ctx, "capi-taken")
	g.Expect(err).NotTo(HaveOccurred())
	other := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "taken"}}
	g.Expect(env.CreateAndWait(ctx, other)).To(Succeed())
	c := capiCluster(t, ns.Name, "taken", true, nil)
	kubeconfigSecret(t, ns.Name, "taken")

	g.Eventually(agentReady(ctx, c)).WithTimeout(20 * time.Second).Should(And(
		haveReason(metav1.ConditionFalse, fleet.ReasonFailed),
		HaveField("Message", ContainSubstring("already exists and was not created for this Cluster API Cluster"))))
	got, err := fleetCluster(ctx, ns.Name, "taken")()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got.UID).To(Equal(other.UID), "never touched")
	g.Expect(metav1.GetControllerOf(got)).To(BeNil())
}
