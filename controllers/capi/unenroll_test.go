package capi_test

import (
	"encoding/json"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/capi"
)

// A fleet Cluster a person deletes is not created again: the decision is
// recorded on the Cluster API Cluster until the person removes it.
func TestDeletingTheFleetClusterUnenrollsUntilAskedAgain(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := env.CreateNamespace(ctx, "capi-unenroll")
	g.Expect(err).NotTo(HaveOccurred())
	c := capiCluster(t, ns.Name, "gone", true, nil)
	kubeconfigSecret(t, ns.Name, "gone")
	g.Eventually(fleetCluster(ctx, ns.Name, "gone")).WithTimeout(20 * time.Second).Should(Not(BeNil()))
	g.Eventually(func(g Gomega) map[string]string {
		got := &clusterv1.Cluster{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
		return got.Annotations
	}).WithTimeout(20*time.Second).Should(HaveKeyWithValue(capi.EnrolledUIDAnnotation, string(c.UID)), "the enrollment recorded")
	fc, err := fleetCluster(ctx, ns.Name, "gone")()
	g.Expect(err).NotTo(HaveOccurred())

	g.Expect(env.Delete(ctx, fc)).To(Succeed())
	g.Eventually(agentReady(ctx, c)).WithTimeout(20 * time.Second).Should(And(
		haveReason(metav1.ConditionFalse, fleet.ReasonUnenrolled), HaveField("Message", ContainSubstring(capi.UnenrolledAnnotation))))
	got := &clusterv1.Cluster{}
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
	g.Expect(got.Annotations).To(HaveKey(capi.UnenrolledAnnotation))
	g.Expect(got.Annotations).NotTo(HaveKey(capi.EnrolledUIDAnnotation))
	g.Expect(got.Finalizers).NotTo(ContainElement(fleet.CAPIEnrollmentFinalizer), "nothing left to clean up")
	g.Eventually(notFound(ctx, fc)).WithTimeout(20 * time.Second).Should(BeTrue())
	// A change of the Cluster API Cluster brings a reconcile; still nothing.
	patch := client.MergeFrom(got.DeepCopy())
	got.Labels["touched"] = "yes"
	g.Expect(env.Patch(ctx, got, patch)).To(Succeed())
	g.Consistently(notFound(ctx, fc)).WithTimeout(2*time.Second).Should(BeTrue(), "not enrolled again")

	// Removing the annotation asks for it again.
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
	patch = client.MergeFrom(got.DeepCopy())
	delete(got.Annotations, capi.UnenrolledAnnotation)
	g.Expect(env.Patch(ctx, got, patch)).To(Succeed())
	g.Eventually(func(g Gomega) types.UID {
		again, err := fleetCluster(ctx, ns.Name, "gone")()
		g.Expect(err).NotTo(HaveOccurred())
		return again.UID
	}).WithTimeout(20*time.Second).ShouldNot(Equal(fc.UID), "enrolled anew")
	g.Eventually(agentReady(ctx, c)).WithTimeout(20 * time.Second).Should(haveReason(metav1.ConditionFalse, fleet.ReasonInstalling))
}

// The agent's bootstrap settings, the ClusterClass and the Cluster API
// facts reach the fleet Cluster, from annotations and ClusterClass
// variables; a bad value fails with a message naming it.
func TestProjectsAgentSettingsClassAndFacts(t *testing.T) {
	g := NewWithT(t)
	ctx := t.Context()
	ns, err := env.CreateNamespace(ctx, "capi-project")
	g.Expect(err).NotTo(HaveOccurred())
	c := capiCluster(t, ns.Name, "cniless", true, func(c *clusterv1.Cluster) {
		c.Labels[clusterv1.ClusterTopologyOwnedLabel] = ""
		c.Annotations = map[string]string{capi.AgentTolerationsAnnotation: "bootstrap", fleet.KeepResourcesOnUnenrollAnnotation: "false"}
		c.Spec.Topology = clusterv1.Topology{ClassRef: clusterv1.ClusterClassRef{Name: "quick-start", Namespace: "classes"}, Version: "v1.34.1",
			Variables: []clusterv1.ClusterVariable{
				{Name: capi.HostNetworkVariable, Value: apiextensionsv1.JSON{Raw: []byte("true")}},
				{Name: "region", Value: apiextensionsv1.JSON{Raw: []byte(`"eu-1"`)}},
			}}
	})
	kubeconfigSecret(t, ns.Name, "cniless")
	g.Eventually(fleetCluster(ctx, ns.Name, "cniless")).WithTimeout(20 * time.Second).Should(And(
		HaveField("Spec.HostNetwork", Equal(ptr.To(true))),
		HaveField("Spec.AgentTolerations", Equal(capi.BootstrapTolerations())),
		HaveField("Labels", Equal(map[string]string{"env": "dev", capi.ClusterClassLabel: "quick-start", capi.ClusterClassNamespaceLabel: "classes"})),
		HaveField("Annotations", HaveKeyWithValue(fleet.KeepResourcesOnUnenrollAnnotation, "false")),
	))
	fc, err := fleetCluster(ctx, ns.Name, "cniless")()
	g.Expect(err).NotTo(HaveOccurred())
	facts, err := json.Marshal(fc.Spec.TemplateValues.Data[capi.TemplateValuesKey])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(facts).To(MatchJSON(`{"clusterName":"cniless","namespace":"` + ns.Name + `","class":"quick-start","classNamespace":"classes",
		"kubernetesVersion":"v1.34.1","variables":{"fleetHostNetwork":true,"region":"eu-1"}}`))

	// A person's own templateValues stay; the facts follow an upgrade.
	patch := client.MergeFrom(fc.DeepCopy())
	fc.Spec.TemplateValues.Data["replicas"] = "3"
	g.Expect(env.Patch(ctx, fc, patch)).To(Succeed())
	got := &clusterv1.Cluster{}
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
	cpatch := client.MergeFrom(got.DeepCopy())
	got.Spec.Topology.Version = "v1.35.0"
	got.Annotations[capi.HostNetworkAnnotation] = "false"
	g.Expect(env.Patch(ctx, got, cpatch)).To(Succeed())
	g.Eventually(func(g Gomega) {
		fc, err := fleetCluster(ctx, ns.Name, "cniless")()
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(fc.Spec.HostNetwork).To(Equal(ptr.To(false)), "the annotation wins over the variable")
		g.Expect(fc.Spec.TemplateValues.Data).To(HaveKeyWithValue("replicas", "3"))
		g.Expect(fc.Spec.TemplateValues.Data[capi.TemplateValuesKey]).To(HaveKeyWithValue("kubernetesVersion", "v1.35.0"))
	}).WithTimeout(20 * time.Second).Should(Succeed())

	// A bad value says where it is and leaves the fleet Cluster as it was.
	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(c), got)).To(Succeed())
	cpatch = client.MergeFrom(got.DeepCopy())
	got.Annotations[capi.AgentTolerationsAnnotation] = "[{key: x, operator: Sometimes}]"
	g.Expect(env.Patch(ctx, got, cpatch)).To(Succeed())
	g.Eventually(agentReady(ctx, c)).WithTimeout(20 * time.Second).Should(And(
		haveReason(metav1.ConditionFalse, fleet.ReasonFailed),
		HaveField("Message", ContainSubstring(`annotation fleet.cattle.io/agent-tolerations: toleration 0: operator "Sometimes" is not Equal or Exists`))))
	g.Expect(fleetCluster(ctx, ns.Name, "cniless")()).To(HaveField("Spec.AgentTolerations", Equal(capi.BootstrapTolerations())))
}
