package capi

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/klog/v2"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/target"
)

func withVars(c *clusterv1.Cluster, vars map[string]string) *clusterv1.Cluster {
	for name, raw := range vars {
		c.Spec.Topology.Variables = append(c.Spec.Topology.Variables, clusterv1.ClusterVariable{Name: name, Value: apiextensionsv1.JSON{Raw: []byte(raw)}})
	}
	return c
}

func annotated(a map[string]string) *clusterv1.Cluster {
	return &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Annotations: a}}
}

func TestDesiredAgentSettings(t *testing.T) {
	custom := []corev1.Toleration{{Key: "example.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
	for name, tc := range map[string]struct {
		in          *clusterv1.Cluster
		hostNetwork *bool
		tolerations []corev1.Toleration
		set         bool
		err         string
	}{
		"nothing asked":           {in: &clusterv1.Cluster{}},
		"host network annotation": {in: annotated(map[string]string{HostNetworkAnnotation: "true"}), hostNetwork: ptr.To(true)},
		"host network off":        {in: annotated(map[string]string{HostNetworkAnnotation: "false"}), hostNetwork: ptr.To(false)},
		"bootstrap tolerations":   {in: annotated(map[string]string{AgentTolerationsAnnotation: "bootstrap"}), tolerations: BootstrapTolerations(), set: true},
		"tolerations as YAML": {in: annotated(map[string]string{AgentTolerationsAnnotation: "- key: example.com/gpu\n  operator: Exists\n  effect: NoSchedule\n"}),
			tolerations: custom, set: true},
		"empty list clears": {in: annotated(map[string]string{AgentTolerationsAnnotation: "[]"}), tolerations: []corev1.Toleration{}, set: true},
		"ClusterClass variables": {in: withVars(&clusterv1.Cluster{}, map[string]string{HostNetworkVariable: "true", AgentTolerationsVariable: `"bootstrap"`}),
			hostNetwork: ptr.To(true), tolerations: BootstrapTolerations(), set: true},
		"ClusterClass variable as a list": {in: withVars(&clusterv1.Cluster{}, map[string]string{AgentTolerationsVariable: `[{"key":"example.com/gpu","operator":"Exists","effect":"NoSchedule"}]`}),
			tolerations: custom, set: true},
		"annotation wins over variable": {in: withVars(annotated(map[string]string{HostNetworkAnnotation: "false"}), map[string]string{HostNetworkVariable: "true"}),
			hostNetwork: ptr.To(false)},
		"bad host network":    {in: annotated(map[string]string{HostNetworkAnnotation: "yes please"}), err: `annotation fleet.cattle.io/host-network: "yes please" is not true or false`},
		"bad variable":        {in: withVars(&clusterv1.Cluster{}, map[string]string{HostNetworkVariable: `"on"`}), err: "ClusterClass variable fleetHostNetwork"},
		"bad tolerations":     {in: annotated(map[string]string{AgentTolerationsAnnotation: "tolerate everything"}), err: "annotation fleet.cattle.io/agent-tolerations: neither \"bootstrap\" nor a list of tolerations"},
		"unknown field":       {in: annotated(map[string]string{AgentTolerationsAnnotation: `[{"kee":"x"}]`}), err: "unknown field"},
		"bad operator":        {in: annotated(map[string]string{AgentTolerationsAnnotation: `[{"key":"x","operator":"Maybe"}]`}), err: `operator "Maybe" is not Equal or Exists`},
		"Exists with a value": {in: annotated(map[string]string{AgentTolerationsAnnotation: `[{"key":"x","operator":"Exists","value":"v"}]`}), err: "Exists takes no value"},
		"bad effect":          {in: annotated(map[string]string{AgentTolerationsAnnotation: `[{"key":"x","effect":"Never"}]`}), err: `effect "Never"`},
		"bad key":             {in: annotated(map[string]string{AgentTolerationsAnnotation: `[{"key":"a b"}]`}), err: `key "a b"`},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			s, err := DesiredAgentSettings(tc.in)
			if tc.err != "" {
				g.Expect(err).To(MatchError(ContainSubstring(tc.err)))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(s.HostNetwork).To(Equal(tc.hostNetwork))
			g.Expect(s.Tolerations).To(Equal(tc.tolerations))
			g.Expect(s.TolerationsSet).To(Equal(tc.set))
		})
	}
}

func TestBootstrapTolerationsCoverTheTaintsOfAFreshCluster(t *testing.T) {
	g := NewWithT(t)
	taints := []corev1.Taint{
		{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.cluster.x-k8s.io/uninitialized", Effect: corev1.TaintEffectNoSchedule},
	}
	for _, taint := range taints {
		tolerated := false
		for _, tol := range BootstrapTolerations() {
			tolerated = tolerated || tol.ToleratesTaint(klog.Background(), &taint, false)
		}
		g.Expect(tolerated).To(BeTrue(), "taint %s", taint.Key)
	}
}

func TestTemplateFacts(t *testing.T) {
	g := NewWithT(t)
	c := withVars(&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "alpha"}},
		map[string]string{"region": `"eu-1"`, "workers": `3`, "cni": `{"name":"calico"}`})
	c.Spec.Topology.ClassRef.Name = "quick-start"
	c.Spec.Topology.Version = "v1.34.1"
	g.Expect(TemplateFacts(c)).To(Equal(map[string]interface{}{
		"clusterName": "alpha", "namespace": "tenant-a", "class": "quick-start", "classNamespace": "tenant-a",
		"kubernetesVersion": "v1.34.1",
		"variables":         map[string]interface{}{"region": "eu-1", "workers": float64(3), "cni": map[string]interface{}{"name": "calico"}},
	}))
	g.Expect(TemplateFacts(&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "n", Name: "plain"}})).To(Equal(map[string]interface{}{
		"clusterName": "plain", "namespace": "n"}), "no class, version or variables: none shown")

	current := &fleet.GenericMap{Data: map[string]interface{}{"replicas": "3", TemplateValuesKey: "stale"}}
	got := WithTemplateFacts(current, map[string]interface{}{"clusterName": "alpha"})
	g.Expect(got.Data).To(Equal(map[string]interface{}{"replicas": "3", TemplateValuesKey: map[string]interface{}{"clusterName": "alpha"}}),
		"a person's keys stay, the Cluster API facts are replaced")
	g.Expect(current.Data[TemplateValuesKey]).To(Equal("stale"), "the input is not changed")
}

// What a Cluster API Cluster asks for reaches the agent's pod as
// agentinstall renders it: the bootstrap tolerations let it be scheduled on
// a fresh node without CNI or cloud provider, and it runs in the host
// network, resolving names through the node (no cluster DNS needed).
func TestRenderedAgentBootstrapsWithoutACNI(t *testing.T) {
	g := NewWithT(t)
	s, err := DesiredAgentSettings(withVars(annotated(map[string]string{AgentTolerationsAnnotation: "bootstrap"}),
		map[string]string{HostNetworkVariable: "true"}))
	g.Expect(err).NotTo(HaveOccurred())
	objs, err := agentinstall.Objects(agentinstall.Options{Tolerations: s.Tolerations, HostNetwork: *s.HostNetwork})
	g.Expect(err).NotTo(HaveOccurred())
	var pod *corev1.PodSpec
	for _, o := range objs {
		if dep, ok := o.(*appsv1.Deployment); ok {
			pod = &dep.Spec.Template.Spec
		}
	}
	g.Expect(pod).NotTo(BeNil())
	g.Expect(pod.HostNetwork).To(BeTrue())
	g.Expect(pod.DNSPolicy).To(BeEmpty(), "ClusterFirst falls back to the node's resolver in the host network")
	for _, taint := range []corev1.Taint{
		{Key: "node.cloudprovider.kubernetes.io/uninitialized", Value: "true", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node-role.kubernetes.io/control-plane", Effect: corev1.TaintEffectNoSchedule},
		{Key: "node.kubernetes.io/not-ready", Effect: corev1.TaintEffectNoSchedule},
	} {
		tolerated := false
		for _, tol := range pod.Tolerations {
			tolerated = tolerated || tol.ToleratesTaint(klog.Background(), &taint, false)
		}
		g.Expect(tolerated).To(BeTrue(), "the agent's pod tolerates %s", taint.Key)
	}
}

// The Cluster API facts reach Helm values templates as a Bundle's values
// see them on the fleet Cluster.
func TestTemplateFactsRenderInHelmValues(t *testing.T) {
	g := NewWithT(t)
	c := withVars(&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "alpha"}}, map[string]string{"region": `"eu-1"`})
	c.Spec.Topology.ClassRef.Name = "quick-start"
	c.Spec.Topology.Version = "v1.34.1"
	fc := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-a", Name: "alpha"},
		Spec: fleet.ClusterSpec{TemplateValues: WithTemplateFacts(nil, TemplateFacts(c))}}
	out, err := target.ProcessTemplateValues(map[string]interface{}{
		"image":  "kube-proxy:${ .ClusterValues.ClusterAPI.kubernetesVersion }",
		"region": "${ .ClusterValues.ClusterAPI.variables.region }",
		"class":  "${ .ClusterValues.ClusterAPI.classNamespace }/${ .ClusterValues.ClusterAPI.class }",
	}, target.TemplateContextFor(fc))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal(map[string]interface{}{"image": "kube-proxy:v1.34.1", "region": "eu-1", "class": "tenant-a/quick-start"}))
}
