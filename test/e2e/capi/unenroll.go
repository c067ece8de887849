package capi

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/capi"
	"github.com/gitfleet/fleet/internal/names"
)

// unenrollNS holds the Cluster API Cluster of UnenrollSpec.
const unenrollNS = "capi-unenroll"

// UnenrollSpec enrolls a Cluster API Cluster with a running agent and a
// Bundle of demo ConfigMaps deployed to it, then has a person delete its
// fleet Cluster: the manager removes the agent downstream before the
// BundleDeployments go, so the demo ConfigMaps stay; the decision is
// recorded on the Cluster API Cluster, which is not enrolled again. A
// second cluster that asks for its releases to be uninstalled first sees
// them go before its agent. Call it in an Ordered container.
func UnenrollSpec(ctx context.Context, inputGetter func() SpecInput) {
	e := &env{ctx: ctx}
	const name, agentNS = "omega", "fleet-omega"
	var (
		admin    client.WithWatch
		w0       client.Client
		omega    *clusterv1.Cluster
		k        *kubelet
		demo     []string
		fleetUID types.UID
	)

	BeforeAll(func() {
		input := inputGetter()
		input.validate("UnenrollSpec")
		e.set(input)
		admin = input.Admin
		w0 = e.localClient(input.Workloads[0])
		Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: unenrollNS}})).To(Succeed())
	})
	AfterAll(e.stopKubelets)

	It("enrolls the cluster, runs its agent and deploys the demo ConfigMaps", func() {
		omega = e.createCAPICluster(capiCluster{name: name, namespace: unenrollNS, workload: e.workloads[0],
			labels:      map[string]string{"demo": name},
			annotations: map[string]string{capi.AgentNamespaceAnnotation: agentNS, capi.ClientIDAnnotation: name}})
		e.initialize(omega)
		e.writeKubeconfigSecret(unenrollNS, name, e.workloads[0], nil)
		k = e.startKubelet(e.workloads[0], agentNS)
		Eventually(e.imported(unenrollNS, name), 60*time.Second, 100*time.Millisecond).Should(Equal(fleet.ReasonAgentRegistered), func() string { return k.Output() })
		fc, err := e.getFleetCluster(unenrollNS, name)
		Expect(err).NotTo(HaveOccurred())
		fleetUID = fc.UID
		Expect(fc.Finalizers).To(ContainElement(fleet.AgentRemovalFinalizer))

		for _, cm := range []string{"omega-demo-a", "omega-demo-b"} {
			b := &fleet.Bundle{
				ObjectMeta: metav1.ObjectMeta{Name: cm, Namespace: unenrollNS},
				Spec: fleet.BundleSpec{
					Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + cm + "}\ndata: {demo: \"yes\"}\n"}},
					Targets:   []fleet.BundleTarget{{Name: "demo", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"demo": name}}}},
				},
			}
			Expect(admin.Create(ctx, b)).To(Succeed())
			demo = append(demo, cm)
		}
		Eventually(func(g Gomega) {
			for _, cm := range demo {
				g.Expect(w0.Get(ctx, types.NamespacedName{Namespace: "default", Name: cm}, &corev1.ConfigMap{})).To(Succeed(), "ConfigMap %s downstream", cm)
			}
		}, 60*time.Second, 200*time.Millisecond).Should(Succeed(), func() string { return k.Output() })
	})

	It("removes the agent downstream when a person deletes the fleet Cluster, and leaves the deployed ConfigMaps", func() {
		fc := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: unenrollNS, Name: name}}
		deleted := time.Now()
		Expect(admin.Delete(ctx, fc)).To(Succeed())
		Eventually(e.notFound(fc), 60*time.Second, 100*time.Millisecond).Should(BeTrue(), "the fleet Cluster goes once the agent is removed")
		took := time.Since(deleted)

		By("the agent is gone downstream")
		err := w0.Get(ctx, types.NamespacedName{Namespace: agentNS, Name: fleet.AgentName}, &appsv1.Deployment{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "agent Deployment: %v", err)
		Expect(k.Output()).To(Equal("(no agent running)"))
		nsObj := &corev1.Namespace{}
		err = w0.Get(ctx, types.NamespacedName{Name: agentNS}, nsObj)
		Expect(apierrors.IsNotFound(err) || err == nil && !nsObj.DeletionTimestamp.IsZero()).To(BeTrue(), "the agent namespace deleted: %v", err)

		By("its deployments are gone upstream, its releases stay downstream")
		Eventually(func() int {
			list := &fleet.BundleDeploymentList{}
			Expect(admin.List(ctx, list, client.InNamespace(names.ClusterNamespace(unenrollNS, name)))).To(Succeed())
			return len(list.Items)
		}, 30*time.Second, 100*time.Millisecond).Should(BeZero())
		Consistently(func(g Gomega) {
			for _, cm := range demo {
				g.Expect(w0.Get(ctx, types.NamespacedName{Namespace: "default", Name: cm}, &corev1.ConfigMap{})).To(Succeed(), "ConfigMap %s stays", cm)
			}
		}, 3*time.Second, 200*time.Millisecond).Should(Succeed())

		By("the Cluster API Cluster records the decision and is not enrolled again")
		Eventually(e.agentReady(unenrollNS, name), 10*time.Second, 100*time.Millisecond).Should(haveReason(metav1.ConditionFalse, fleet.ReasonUnenrolled))
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(omega), omega)).To(Succeed())
		Expect(omega.Annotations).To(HaveKey(capi.UnenrolledAnnotation))
		Expect(omega.Finalizers).NotTo(ContainElement(fleet.CAPIEnrollmentFinalizer))
		Consistently(func() bool { _, err := e.getFleetCluster(unenrollNS, name); return apierrors.IsNotFound(err) },
			3*time.Second, 200*time.Millisecond).Should(BeTrue(), "not re-created (it was %s)", fleetUID)
		msg := fmt.Sprintf("Un-enrolled (agent removed, fleet Cluster gone) %s after the fleet Cluster was deleted", took.Round(time.Millisecond))
		AddReportEntry("unenroll", msg)
		fmt.Println(msg)
	})

	It("uninstalls the releases first when the cluster says fleet.cattle.io/keep-resources-on-unenroll: \"false\"", func() {
		const sigma, sigmaNS = "sigma", "fleet-sigma"
		c := e.createCAPICluster(capiCluster{name: sigma, namespace: unenrollNS, workload: e.workloads[0],
			labels: map[string]string{"demo": sigma},
			annotations: map[string]string{capi.AgentNamespaceAnnotation: sigmaNS, capi.ClientIDAnnotation: sigma,
				fleet.KeepResourcesOnUnenrollAnnotation: "false"}})
		e.initialize(c)
		e.writeKubeconfigSecret(unenrollNS, sigma, e.workloads[0], nil)
		ks := e.startKubelet(e.workloads[0], sigmaNS)
		Eventually(e.imported(unenrollNS, sigma), 60*time.Second, 100*time.Millisecond).Should(Equal(fleet.ReasonAgentRegistered), func() string { return ks.Output() })
		const cm = "sigma-demo"
		Expect(admin.Create(ctx, &fleet.Bundle{
			ObjectMeta: metav1.ObjectMeta{Name: cm, Namespace: unenrollNS},
			Spec: fleet.BundleSpec{
				Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + cm + "}\n"}},
				Targets:   []fleet.BundleTarget{{Name: "demo", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"demo": sigma}}}},
			},
		})).To(Succeed())
		Eventually(func() error {
			return w0.Get(ctx, types.NamespacedName{Namespace: "default", Name: cm}, &corev1.ConfigMap{})
		},
			60*time.Second, 200*time.Millisecond).Should(Succeed(), func() string { return ks.Output() })

		fc := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: unenrollNS, Name: sigma}}
		Expect(admin.Delete(ctx, fc)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(w0.Get(ctx, types.NamespacedName{Namespace: "default", Name: cm}, &corev1.ConfigMap{}))
		}, 60*time.Second, 200*time.Millisecond).Should(BeTrue(), "the agent uninstalled its release")
		Eventually(e.notFound(fc), 60*time.Second, 100*time.Millisecond).Should(BeTrue(), "then the fleet Cluster goes")
		err := w0.Get(ctx, types.NamespacedName{Namespace: sigmaNS, Name: fleet.AgentName}, &appsv1.Deployment{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "and the agent with it: %v", err)
		Eventually(ks.Output, 10*time.Second, 100*time.Millisecond).Should(Equal("(no agent running)"))
		Consistently(func(g Gomega) {
			for _, name := range demo {
				g.Expect(w0.Get(ctx, types.NamespacedName{Namespace: "default", Name: name}, &corev1.ConfigMap{})).To(Succeed(), "omega's ConfigMap %s untouched", name)
			}
		}, time.Second, 200*time.Millisecond).Should(Succeed())
	})
}
