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

	"github.com/gitfleet/fleet/agent/registration"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/capi"
	fleetcheckin "github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// moveNS holds the moved Cluster API Cluster, on both management clusters.
const moveNS = "capi-move"

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
	e := &env{ctx: ctx}
	var (
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
		checkin time.Duration
	)
	const (
		name           = "mover"
		agentNamespace = "fleet-mover"
		bundle         = "move-app"
	)
	clusterNS := names.ClusterNamespace(moveNS, name)

	BeforeAll(func() {
		in := inputGetter()
		in.validate("MoveSpec")
		Expect(in.Target).NotTo(BeNil(), "MoveSpec: SpecInput.Target is required")
		Expect(in.TargetAdmin).NotTo(BeNil(), "MoveSpec: SpecInput.TargetAdmin is required")
		e.set(in)
		source, target, targetCP = in.Admin, in.TargetAdmin, in.Target
		checkin = in.ImportStaleAfter / 3
		// Its own agent namespace and identity: other specs' clusters use
		// this workload control plane too.
		workload = in.Workloads[0]
		local = e.localClient(workload)
		for _, c := range []client.Client{source, target} {
			Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: moveNS}})).To(Succeed())
			// The same bundle on both managers, as the same GitRepo makes.
			Expect(c.Create(ctx, &fleet.Bundle{
				ObjectMeta: metav1.ObjectMeta{Name: bundle, Namespace: moveNS},
				Spec: fleet.BundleSpec{
					Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + bundle + "}\ndata: {moved: \"no\"}\n"}},
					Targets:   []fleet.BundleTarget{{Name: "movers", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"move": "yes"}}}},
				},
			})).To(Succeed())
		}
	})
	AfterAll(func() {
		if watcher != nil {
			watcher.Stop()
		}
		if kubelet != nil {
			kubelet.stop()
		}
	})

	It("enrolls the cluster on the first manager and deploys the bundle", func() {
		src = e.createCAPICluster(capiCluster{name: name, namespace: moveNS, workload: workload,
			// The target's manager enrolls by opt-in (OptInSpec): the label
			// moves with the cluster.
			labels:      map[string]string{"move": "yes", capi.EnrollLabel: "true"},
			annotations: map[string]string{capi.AgentNamespaceAnnotation: agentNamespace, capi.ClientIDAnnotation: name}})
		e.initialize(src)
		e.writeKubeconfigSecret(moveNS, name, workload, nil)
		kubelet = e.startKubelet(workload, agentNamespace)
		Eventually(e.imported(moveNS, name), 60*time.Second, 100*time.Millisecond).Should(Equal(fleet.ReasonAgentRegistered), func() string { return kubelet.Output() })

		cm := &corev1.ConfigMap{}
		Eventually(func() error {
			return local.Get(ctx, types.NamespacedName{Namespace: "default", Name: bundle}, cm)
		}, 60*time.Second, 100*time.Millisecond).Should(Succeed(), func() string { return kubelet.Output() })
		cmUID = cm.UID
		Eventually(deployed(ctx, source, clusterNS, bundle), 30*time.Second, 100*time.Millisecond).Should(BeTrue())
		rel := &corev1.Secret{}
		Expect(local.Get(ctx, types.NamespacedName{Namespace: "default", Name: "sh.helm.release.v1." + bundle + ".v1"}, rel)).To(Succeed())
		releaseUID = rel.UID
		var err error
		srcFleet, err = e.getFleetCluster(moveNS, name)
		Expect(err).NotTo(HaveOccurred())
		Expect(srcFleet.OwnerReferences).To(BeEmpty(), "nothing for a garbage collector to follow")

		wc, err := client.NewWithWatch(workload.Config, client.Options{Scheme: registration.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		watcher = e2e.WatchDeletions(ctx, wc, e2e.DeletionScope{Namespace: "default", Name: bundle, FromVersion: cm.ResourceVersion,
			Kinds: []client.ObjectList{&corev1.ConfigMapList{}}})
	})

	It("moves the Cluster API Cluster to the second management cluster", func() {
		moved := time.Now()
		By("pausing it on the source")
		e.setPaused(src, true)
		Expect(source.Get(ctx, client.ObjectKeyFromObject(src), src)).To(Succeed())
		secret := &corev1.Secret{}
		Expect(source.Get(ctx, types.NamespacedName{Namespace: moveNS, Name: capi.KubeconfigSecretName(name)}, secret)).To(Succeed())

		By("creating it, paused, and its kubeconfig Secret on the target")
		dst := &clusterv1.Cluster{
			ObjectMeta: metav1.ObjectMeta{Namespace: moveNS, Name: name, Labels: src.Labels, Annotations: src.Annotations},
			Spec:       *src.Spec.DeepCopy(),
		}
		Expect(dst.Spec.Paused).To(Equal(ptr.To(true)))
		Expect(target.Create(ctx, dst)).To(Succeed())
		Expect(target.Status().Patch(ctx, dst, client.RawPatch(types.MergePatchType,
			[]byte(`{"status":{"initialization":{"controlPlaneInitialized":true}}}`)))).To(Succeed())
		Expect(target.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: moveNS, Name: secret.Name, Labels: secret.Labels},
			Type:       secret.Type, Data: secret.Data,
		})).To(Succeed())

		By("deleting them on the source: delete-for-move, finalizers stripped, delete")
		for _, obj := range []client.Object{secret, src} {
			patch := fmt.Sprintf(`[{"op":"add","path":"/metadata/annotations","value":{%q:""}}]`, capi.DeleteForMoveAnnotation)
			Expect(source.Patch(ctx, obj, client.RawPatch(types.JSONPatchType, []byte(patch)))).To(Succeed())
			Expect(source.Patch(ctx, obj, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"finalizers":[]}}`)))).To(Succeed())
			Expect(source.Delete(ctx, obj)).To(Succeed())
		}
		Eventually(e.notFound(&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: moveNS, Name: name}}), 10*time.Second, 100*time.Millisecond).Should(BeTrue())

		By("unpausing it on the target")
		Expect(target.Patch(ctx, dst, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"paused":false}}`)))).To(Succeed())

		By("the agent goes over to the target's manager and checks in there")
		Eventually(func() string {
			c := &fleet.Cluster{}
			if err := target.Get(ctx, types.NamespacedName{Namespace: moveNS, Name: name}, c); err != nil {
				return err.Error()
			}
			if cond := meta.FindStatusCondition(c.Status.Conditions, fleet.ConditionImported); cond != nil {
				return cond.Reason
			}
			return ""
		}, 90*time.Second, 200*time.Millisecond).Should(Equal(fleet.ReasonAgentRegistered), func() string { return kubelet.Output() })
		switched := time.Since(moved)
		Eventually(func() string {
			s := &corev1.Secret{}
			if err := local.Get(ctx, types.NamespacedName{Namespace: agentNamespace, Name: fleet.AgentName}, s); err != nil {
				return err.Error()
			}
			return string(s.Data[registration.APIServerURLKey])
		}, 10*time.Second, 100*time.Millisecond).Should(Equal(targetCP.Config.Host), "the stored credential is the target's")
		// The agent's Lease at the target: lastSeen is written only now
		// and then.
		lastCheckIn := func() time.Time {
			c := &fleet.Cluster{}
			Expect(target.Get(ctx, types.NamespacedName{Namespace: moveNS, Name: name}, c)).To(Succeed())
			seen, err := fleetcheckin.LastOf(ctx, target, c)
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
		}, 3*checkin, 200*time.Millisecond).Should(BeTrue(), "check-ins go on at the target")
		msg := fmt.Sprintf("Agent reporting to the target's manager %s after the move began", switched.Round(time.Millisecond))
		AddReportEntry("move", msg)
		fmt.Println(msg)
	})

	It("keeps the release: the target's BundleDeployment adopts it, the ConfigMap is the same object", func() {
		Eventually(deployed(ctx, target, clusterNS, bundle), 60*time.Second, 200*time.Millisecond).Should(BeTrue(), func() string { return kubelet.Output() })
		Consistently(func(g Gomega) {
			cm := &corev1.ConfigMap{}
			g.Expect(local.Get(ctx, types.NamespacedName{Namespace: "default", Name: bundle}, cm)).To(Succeed())
			g.Expect(cm.UID).To(Equal(cmUID), "the same ConfigMap")
			rel := &corev1.Secret{}
			g.Expect(local.Get(ctx, types.NamespacedName{Namespace: "default", Name: "sh.helm.release.v1." + bundle + ".v1"}, rel)).To(Succeed())
			g.Expect(rel.UID).To(Equal(releaseUID), "the same Helm release, never uninstalled")
		}, 5*time.Second, 200*time.Millisecond).Should(Succeed())
		Expect(watcher.Seen()).To(BeEmpty(), "the ConfigMap was never deleted")
	})

	It("leaves the source's fleet Cluster and BundleDeployment in place, marked as moved", func() {
		fc, err := e.getFleetCluster(moveNS, name)
		Expect(err).NotTo(HaveOccurred())
		Expect(fc.UID).To(Equal(srcFleet.UID))
		Expect(fc.DeletionTimestamp).To(BeNil())
		Expect(fc.Annotations).To(HaveKey(fleet.CAPIMovedAnnotation))
		Eventually(e.imported(moveNS, name), 10*time.Second, 100*time.Millisecond).Should(Equal(fleet.ReasonMovedAway))
		bd := &fleet.BundleDeployment{}
		Expect(source.Get(ctx, types.NamespacedName{Namespace: clusterNS, Name: bundle}, bd)).To(Succeed())
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
