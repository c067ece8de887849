package capi

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/capi"
)

// The selectors of the Target's manager, which enrolls by opt-in: Cluster
// API Clusters labelled fleet.cattle.io/enroll=true, in namespaces without
// the label enroll-blocked (--capi-cluster-selector
// fleet.cattle.io/enroll=true --capi-namespace-selector '!enroll-blocked').
var (
	OptInClusterSelector   = labels.SelectorFromSet(labels.Set{capi.EnrollLabel: "true"})
	OptInNamespaceSelector = func() labels.Selector {
		s, err := labels.Parse("!enroll-blocked")
		if err != nil {
			panic(err)
		}
		return s
	}()
)

// OptInSpec runs against the Target's manager in opt-in mode: only Cluster
// API Clusters its selectors choose are enrolled; labelling one enrolls
// it, unlabelling removes its agent and its fleet Cluster. Call it in an
// Ordered container.
func OptInSpec(ctx context.Context, inputGetter func() SpecInput) {
	const optInNS, blockedNS = "capi-optin", "capi-optin-blocked"
	var (
		target   client.WithWatch
		workload client.Client
		input    SpecInput
	)
	e := &env{ctx: ctx}
	fleetCluster := func(namespace, name string) func() error {
		return func() error {
			return target.Get(ctx, types.NamespacedName{Namespace: namespace, Name: name}, &fleet.Cluster{})
		}
	}
	absent := func(namespace, name string) func() bool {
		return func() bool { return apierrors.IsNotFound(fleetCluster(namespace, name)()) }
	}
	create := func(namespace, name string, lbls map[string]string) *clusterv1.Cluster {
		GinkgoHelper()
		c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: lbls,
			Annotations: map[string]string{capi.AgentNamespaceAnnotation: "fleet-optin-" + name, capi.ClientIDAnnotation: "optin-" + name}},
			Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 6443}}}
		Expect(target.Create(ctx, c)).To(Succeed())
		Expect(target.Status().Patch(ctx, c, client.RawPatch(types.MergePatchType,
			[]byte(`{"status":{"initialization":{"controlPlaneInitialized":true}}}`)))).To(Succeed())
		value, err := e.kubeconfigFor(1)
		Expect(err).NotTo(HaveOccurred())
		Expect(target.Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: capi.KubeconfigSecretName(name), Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Type:       clusterv1.ClusterSecretType, Data: map[string][]byte{fleet.KubeConfigSecretValueKey: value},
		})).To(Succeed())
		return c
	}
	setLabel := func(obj client.Object, key string, value *string) {
		GinkgoHelper()
		Expect(target.Get(ctx, client.ObjectKeyFromObject(obj), obj)).To(Succeed())
		patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
		l := obj.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		if value == nil {
			delete(l, key)
		} else {
			l[key] = *value
		}
		obj.SetLabels(l)
		Expect(target.Patch(ctx, obj, patch)).To(Succeed())
	}
	yes := "true"
	var plain, chosen *clusterv1.Cluster
	blockedNSObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: blockedNS, Labels: map[string]string{"enroll-blocked": "yes"}}}

	BeforeAll(func() {
		input = inputGetter()
		input.validate("OptInSpec")
		Expect(input.TargetAdmin).NotTo(BeNil(), "OptInSpec: SpecInput.TargetAdmin (a manager in opt-in mode) is required")
		e.set(input)
		target = input.TargetAdmin
		workload = e.localClient(input.Workloads[1])
		Expect(target.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: optInNS}})).To(Succeed())
		Expect(target.Create(ctx, blockedNSObj)).To(Succeed())
	})

	It("enrolls only the Cluster API Clusters its selectors choose", func() {
		plain = create(optInNS, "plain", map[string]string{"env": "dev"})
		chosen = create(optInNS, "chosen", map[string]string{"env": "dev", capi.EnrollLabel: "true"})
		create(blockedNS, "blocked", map[string]string{capi.EnrollLabel: "true"})
		Eventually(fleetCluster(optInNS, "chosen"), 20*time.Second, 100*time.Millisecond).Should(Succeed(), "the labelled cluster is enrolled")
		Consistently(func() bool { return absent(optInNS, "plain")() && absent(blockedNS, "blocked")() }, 3*time.Second, 200*time.Millisecond).
			Should(BeTrue(), "an unlabelled cluster, and one in a namespace the namespace selector leaves out, are not")
		c := &clusterv1.Cluster{}
		Expect(target.Get(ctx, client.ObjectKeyFromObject(plain), c)).To(Succeed())
		Expect(meta.FindStatusCondition(c.Status.Conditions, capi.ConditionFleetAgentReady)).To(BeNil(), "nothing said about a cluster not chosen")
	})

	It("enrolls a cluster once it is labelled, or its namespace chosen", func() {
		setLabel(plain, capi.EnrollLabel, &yes)
		Eventually(fleetCluster(optInNS, "plain"), 20*time.Second, 100*time.Millisecond).Should(Succeed())
		setLabel(blockedNSObj, "enroll-blocked", nil)
		Eventually(fleetCluster(blockedNS, "blocked"), 20*time.Second, 100*time.Millisecond).Should(Succeed())
	})

	It("un-enrolls a cluster whose label is removed: its agent is removed downstream and its fleet Cluster deleted", func() {
		Eventually(func() string {
			fc := &fleet.Cluster{}
			if err := target.Get(ctx, client.ObjectKeyFromObject(chosen), fc); err != nil {
				return err.Error()
			}
			if cond := meta.FindStatusCondition(fc.Status.Conditions, fleet.ConditionImported); cond != nil {
				return cond.Reason
			}
			return ""
		}, 30*time.Second, 100*time.Millisecond).Should(Equal(fleet.ReasonApplied), "the agent installed downstream")
		agent := types.NamespacedName{Namespace: "fleet-optin-chosen", Name: fleet.AgentName}
		Expect(workload.Get(ctx, agent, &appsv1.Deployment{})).To(Succeed())

		setLabel(chosen, capi.EnrollLabel, nil)
		Eventually(absent(optInNS, "chosen"), 30*time.Second, 100*time.Millisecond).Should(BeTrue(), "the fleet Cluster deleted")
		err := workload.Get(ctx, agent, &appsv1.Deployment{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the agent removed downstream: %v", err)
		Expect(target.Get(ctx, client.ObjectKeyFromObject(chosen), chosen)).To(Succeed())
		Expect(chosen.Finalizers).NotTo(ContainElement(fleet.CAPIEnrollmentFinalizer))
	})
}
