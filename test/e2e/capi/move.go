package capi

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/kinds"
	"github.com/gitfleet/fleet/agent/upstream"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/capi"
	fleetcheckin "github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// moveNS holds the moved Cluster API Cluster, on both management clusters.
const moveNS = "capi-move"

const (
	// moveClusterName names the Cluster API Cluster MoveSpec moves, and
	// its agent's client ID.
	moveClusterName = "mover"
	// moveAgentNamespace is that cluster's agent namespace.
	moveAgentNamespace = "fleet-mover"
	// moveBundle is the bundle deployed to it.
	moveBundle = "move-app"
)

// move is what the steps of MoveSpec share.
type move struct {
	*env
	source, target client.WithWatch
	targetCP       *controlplane.ControlPlane
	workload       *controlplane.ControlPlane
	local          client.Client
	kubelet        *kubelet
	src            *clusterv1.Cluster
	srcFleet       *fleet.Cluster
	cmUID          types.UID
	releaseUID     types.UID
	watcher        *e2e.DeletionWatch
	// The agent's check-in interval, as the managers write it.
	checkin   time.Duration
	clusterNS string
}

// MoveSpec plays `clusterctl move` of one Cluster API Cluster between two
// management clusters, each with its own manager and the same Bundle: the
// cluster is enrolled on the first, its agent deploys the bundle (a
// ConfigMap) to the workload cluster, then the move pauses the Cluster,
// creates it (paused) and its kubeconfig Secret on the target, deletes them
// on the source as clusterctl does (delete-for-move annotation, finalizers
// stripped, delete) and unpauses the target's. It checks that the ConfigMap
// is never deleted (the same object throughout), that the source keeps its
// fleet Cluster and BundleDeployment, and that the agent goes over to the
// target's manager and checks in there. Call it in an Ordered container.
func MoveSpec(ctx context.Context, inputGetter func() SpecInput) {
	s := &move{env: &env{ctx: ctx}, clusterNS: names.ClusterNamespace(moveNS, moveClusterName)}

	BeforeAll(func() {
		in := inputGetter()
		in.validate("MoveSpec")
		Expect(in.Target).NotTo(BeNil(), "MoveSpec: SpecInput.Target is required")
		Expect(in.TargetAdmin).NotTo(BeNil(), "MoveSpec: SpecInput.TargetAdmin is required")
		s.set(in)
		s.source, s.target, s.targetCP = in.Admin, in.TargetAdmin, in.Target
		s.checkin = in.ImportStaleAfter / 3
		// Its own agent namespace and identity: other specs' clusters use
		// this workload control plane too.
		s.workload = in.Workloads[0]
		s.local = s.localClient(s.workload)
		for _, c := range []client.Client{s.source, s.target} {
			Expect(c.Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: moveNS}})).To(Succeed())
			// The same bundle on both managers, as the same GitRepo makes.
			Expect(c.Create(s.ctx, &fleet.Bundle{
				ObjectMeta: metav1.ObjectMeta{Name: moveBundle, Namespace: moveNS},
				Spec: fleet.BundleSpec{
					Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + moveBundle + "}\ndata: {moved: \"no\"}\n"}},
					Targets:   []fleet.BundleTarget{{Name: "movers", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"move": "yes"}}}},
				},
			})).To(Succeed())
		}
	})
	AfterAll(func() {
		if s.watcher != nil {
			s.watcher.Stop()
		}
		if s.kubelet != nil {
			s.kubelet.stop()
		}
	})

	It("enrolls the cluster on the first manager and deploys the bundle", func() {
		s.src = s.createCAPICluster(capiCluster{name: moveClusterName, namespace: moveNS, workload: s.workload,
			// The target's manager enrolls by opt-in (OptInSpec): the label
			// moves with the cluster.
			labels:      map[string]string{"move": "yes", capi.EnrollLabel: "true"},
			annotations: map[string]string{capi.AgentNamespaceAnnotation: moveAgentNamespace, capi.ClientIDAnnotation: moveClusterName}})
		s.initialize(s.src)
		s.writeKubeconfigSecret(moveNS, moveClusterName, s.workload, nil)
		s.kubelet = s.startKubelet(s.workload, moveAgentNamespace)
		Eventually(s.imported(moveNS, moveClusterName), 60*time.Second, 100*time.Millisecond).Should(Equal(fleet.ReasonAgentRegistered), func() string { return s.kubelet.Output() })

		cm := &corev1.ConfigMap{}
		Eventually(func() error {
			return s.local.Get(s.ctx, types.NamespacedName{Namespace: "default", Name: moveBundle}, cm)
		}, 60*time.Second, 100*time.Millisecond).Should(Succeed(), func() string { return s.kubelet.Output() })
		s.cmUID = cm.UID
		Eventually(deployed(s.ctx, s.source, s.clusterNS, moveBundle), 30*time.Second, 100*time.Millisecond).Should(BeTrue())
		rel := &corev1.Secret{}
		Expect(s.local.Get(s.ctx, types.NamespacedName{Namespace: "default", Name: "sh.helm.release.v1." + moveBundle + ".v1"}, rel)).To(Succeed())
		s.releaseUID = rel.UID
		var err error
		s.srcFleet, err = s.getFleetCluster(moveNS, moveClusterName)
		Expect(err).NotTo(HaveOccurred())
		Expect(s.srcFleet.OwnerReferences).To(BeEmpty(), "nothing for a garbage collector to follow")

		wc, err := client.NewWithWatch(s.workload.Config, client.Options{Scheme: kinds.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		s.watcher = e2e.WatchDeletions(s.ctx, wc, e2e.DeletionScope{Namespace: "default", Name: moveBundle, FromVersion: cm.ResourceVersion,
			Kinds: []client.ObjectList{&corev1.ConfigMapList{}}})
	})

	moveSteps(s)
}

// moveSteps: the Cluster API Cluster moves to the second management
// cluster, the release is kept, and the source's objects stay, marked as
// moved.
func moveSteps(s *move) {
	It("moves the Cluster API Cluster to the second management cluster", func() {
		moved := time.Now()
		By("pausing it on the source")
		s.setPaused(s.src, true)
		Expect(s.source.Get(s.ctx, client.ObjectKeyFromObject(s.src), s.src)).To(Succeed())
		secret := &corev1.Secret{}
		Expect(s.source.Get(s.ctx, types.NamespacedName{Namespace: moveNS, Name: capi.KubeconfigSecretName(moveClusterName)}, secret)).To(Succeed())

		By("creating it, paused, and its kubeconfig Secret on the target")
		dst := &clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: moveNS, Name: moveClusterName, Labels: s.src.Labels, Annotations: s.src.Annotations},
			Spec:       *s.src.Spec.DeepCopy(),
		}
		Expect(dst.Spec.Paused).To(Equal(ptr.To(true)))
		Expect(s.target.Create(s.ctx, dst)).To(Succeed())
		Expect(s.target.Status().Patch(s.ctx, dst, client.RawPatch(types.MergePatchType,
			[]byte(`{"status":{"initialization":{"controlPlaneInitialized":true}}}`)))).To(Succeed())
		Expect(s.target.Create(s.ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: moveNS, Name: secret.Name, Labels: secret.Labels},
			Type:       secret.Type, Data: secret.Data,
		})).To(Succeed())

		By("deleting them on the source: delete-for-move, finalizers stripped, delete")
		for _, obj := range []client.Object{secret, s.src} {
			patch := fmt.Sprintf(`[{"op":"add","path":"/metadata/annotations","value":{%q:""}}]`, capi.DeleteForMoveAnnotation)
			Expect(s.source.Patch(s.ctx, obj, client.RawPatch(types.JSONPatchType, []byte(patch)))).To(Succeed())
			Expect(s.source.Patch(s.ctx, obj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":[]}}`)))).To(Succeed())
			Expect(s.source.Delete(s.ctx, obj)).To(Succeed())
		}
		Eventually(s.notFound(&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: moveNS, Name: moveClusterName}}), 10*time.Second, 100*time.Millisecond).Should(BeTrue())

		By("unpausing it on the target")
		Expect(s.target.Patch(s.ctx, dst, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":false}}`)))).To(Succeed())

		By("the agent goes over to the target's manager and checks in there")
		Eventually(func() string {
			c := &fleet.Cluster{}
			if err := s.target.Get(s.ctx, types.NamespacedName{Namespace: moveNS, Name: moveClusterName}, c); err != nil {
				return err.Error()
			}
			if cond := meta.FindStatusCondition(c.Status.Conditions, fleet.ConditionImported); cond != nil {
				return cond.Reason
			}
			return ""
		}, 90*time.Second, 200*time.Millisecond).Should(Equal(fleet.ReasonAgentRegistered), func() string { return s.kubelet.Output() })
		switched := time.Since(moved)
		Eventually(func() string {
			secret := &corev1.Secret{}
			if err := s.local.Get(s.ctx, types.NamespacedName{Namespace: moveAgentNamespace, Name: fleet.AgentName}, secret); err != nil {
				return err.Error()
			}
			return string(secret.Data[upstream.APIServerURLKey])
		}, 10*time.Second, 100*time.Millisecond).Should(Equal(s.targetCP.Config.Host), "the stored credential is the target's")
		// The agent's Lease at the target: lastSeen is written only now
		// and then.
		lastCheckIn := func() time.Time {
			c := &fleet.Cluster{}
			Expect(s.target.Get(s.ctx, types.NamespacedName{Namespace: moveNS, Name: moveClusterName}, c)).To(Succeed())
			seen, err := fleetcheckin.LastOf(s.ctx, s.target, c)
			Expect(err).NotTo(HaveOccurred())
			return seen
		}
		var first time.Time
		Eventually(func() bool {
			first = lastCheckIn()
			return first.IsZero()
		}, 30*time.Second, 200*time.Millisecond).Should(BeFalse())
		Eventually(func() bool {
			return lastCheckIn().After(first)
		}, 3*s.checkin, 200*time.Millisecond).Should(BeTrue(), "check-ins go on at the target")
		msg := fmt.Sprintf("Agent reporting to the target's manager %s after the move began", switched.Round(time.Millisecond))
		AddReportEntry("move", msg)
		fmt.Println(msg)
	})

	It("keeps the release: the target's BundleDeployment adopts it, the ConfigMap is the same object", func() {
		Eventually(deployed(s.ctx, s.target, s.clusterNS, moveBundle), 60*time.Second, 200*time.Millisecond).Should(BeTrue(), func() string { return s.kubelet.Output() })
		Consistently(func(g Gomega) {
			cm := &corev1.ConfigMap{}
			g.Expect(s.local.Get(s.ctx, types.NamespacedName{Namespace: "default", Name: moveBundle}, cm)).To(Succeed())
			g.Expect(cm.UID).To(Equal(s.cmUID), "the same ConfigMap")
			rel := &corev1.Secret{}
			g.Expect(s.local.Get(s.ctx, types.NamespacedName{Namespace: "default", Name: "sh.helm.release.v1." + moveBundle + ".v1"}, rel)).To(Succeed())
			g.Expect(rel.UID).To(Equal(s.releaseUID), "the same Helm release, never uninstalled")
		}, 5*time.Second, 200*time.Millisecond).Should(Succeed())
		Expect(s.watcher.Seen()).To(BeEmpty(), "the ConfigMap was never deleted")
	})

	It("leaves the source's fleet Cluster and BundleDeployment in place, marked as moved", func() {
		fc, err := s.getFleetCluster(moveNS, moveClusterName)
		Expect(err).NotTo(HaveOccurred())
		Expect(fc.UID).To(Equal(s.srcFleet.UID))
		Expect(fc.DeletionTimestamp).To(BeNil())
		Expect(fc.Annotations).To(HaveKey(fleet.CAPIMovedAnnotation))
		Eventually(s.imported(moveNS, moveClusterName), 10*time.Second, 100*time.Millisecond).Should(Equal(fleet.ReasonMovedAway))
		bd := &fleet.BundleDeployment{}
		Expect(s.source.Get(s.ctx, types.NamespacedName{Namespace: s.clusterNS, Name: moveBundle}, bd)).To(Succeed())
		Expect(bd.DeletionTimestamp).To(BeNil())
	})
}

// deployed tells whether the BundleDeployment name of a cluster namespace
// has been applied by the agent: its appliedDeploymentID is its
// deploymentID.
func deployed(ctx context.Context, c client.Client, namespace, name string) func() bool {
	return func() bool {
		bd := &fleet.BundleDeployment{}
		if err := c.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, bd); err != nil {
			return false
		}
		return bd.Spec.DeploymentID != "" && bd.Status.AppliedDeploymentID == bd.Spec.DeploymentID
	}
}
