package agentmanifest

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"sigs.k8s.io/yaml"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func TestObjectsRoundTrip(t *testing.T) {
	g := NewWithT(t)
	boot := &Bootstrap{APIServerURL: "https://m:6443", APIServerCA: "CA", Token: "t", ClusterNamespace: "fleet-default",
		SystemRegistrationNamespace: "fleet-clusters-system", TokenName: "token-1"}
	cfg := &AgentConfig{Labels: map[string]string{"env": "prod"}, ClientID: "id", CheckinInterval: "1m"}
	objs, err := Objects(Options{Namespace: "agents", Bootstrap: boot, Config: cfg, PrivateRepoURL: "reg.local:5000",
		Tolerations: []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists}}})
	g.Expect(err).NotTo(HaveOccurred())

	var secret *corev1.Secret
	var cm *corev1.ConfigMap
	var dep *appsv1.Deployment
	for _, o := range objs {
		g.Expect(o.GetNamespace()).To(Or(Equal("agents"), BeEmpty()))
		switch v := o.(type) {
		case *corev1.Secret:
			secret = v
		case *corev1.ConfigMap:
			cm = v
		case *appsv1.Deployment:
			dep = v
		}
	}
	g.Expect(secret.Name).To(Equal(fleet.AgentBootstrapSecretName))
	gotBoot, err := ReadBootstrap(secret)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gotBoot).To(Equal(boot))
	gotCfg, err := ReadConfig(cm)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gotCfg).To(Equal(cfg))
	g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal("reg.local:5000/gitfleet/fleet-agent:latest"))
	g.Expect(dep.Spec.Template.Spec.Tolerations).To(HaveLen(1))

	out, err := YAML(objs)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(out)).NotTo(ContainSubstring("creationTimestamp"))
	g.Expect(string(out)).NotTo(ContainSubstring("status:"))
}

func TestValidation(t *testing.T) {
	g := NewWithT(t)
	_, err := Objects(Options{Bootstrap: &Bootstrap{}})
	g.Expect(err).To(MatchError(ContainSubstring("--server-url")))
	_, err = Objects(Options{Config: &AgentConfig{Labels: map[string]string{"bad key": "v"}}})
	g.Expect(err).To(MatchError(ContainSubstring(`label key "bad key"`)))
	_, err = ReadConfig(&corev1.ConfigMap{Data: map[string]string{ConfigKey: "labelz: {}"}})
	g.Expect(err).To(MatchError(ContainSubstring("labelz")))
	var c AgentConfig
	g.Expect(yaml.Unmarshal([]byte("labels: {a: b}"), &c)).To(Succeed())
}

func TestWithRegistry(t *testing.T) {
	g := NewWithT(t)
	g.Expect(WithRegistry("rancher/agent:1", "reg.local")).To(Equal("reg.local/rancher/agent:1"))
	g.Expect(WithRegistry("docker.io/rancher/agent:1", "reg.local/")).To(Equal("reg.local/rancher/agent:1"))
	g.Expect(WithRegistry("localhost/agent", "r")).To(Equal("r/agent"))
	g.Expect(WithRegistry("agent", "r")).To(Equal("r/agent"))
}

func TestDefaultResources(t *testing.T) {
	g := NewWithT(t)
	objs, err := Objects(Options{})
	g.Expect(err).NotTo(HaveOccurred())
	var dep *appsv1.Deployment
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok {
			dep = d
		}
	}
	g.Expect(dep).NotTo(BeNil())
	c := dep.Spec.Template.Spec.Containers[0]
	g.Expect(c.Resources).To(Equal(DefaultResources()))
	g.Expect(c.Env).To(ContainElement(corev1.EnvVar{Name: "GOMEMLIMIT", Value: "204MiB"}))

	// A Cluster's own resources replace the defaults, GOMEMLIMIT follows
	// its limit, and one set by the user is kept.
	own := corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("100Mi")}}
	objs, err = Objects(Options{Resources: &own, EnvVars: []corev1.EnvVar{{Name: "GOMEMLIMIT", Value: "50MiB"}}})
	g.Expect(err).NotTo(HaveOccurred())
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok {
			c := d.Spec.Template.Spec.Containers[0]
			g.Expect(c.Resources).To(Equal(own))
			g.Expect(c.Env).To(ContainElement(corev1.EnvVar{Name: "GOMEMLIMIT", Value: "50MiB"}))
			g.Expect(c.Env).NotTo(ContainElement(corev1.EnvVar{Name: "GOMEMLIMIT", Value: "80MiB"}))
		}
	}
	g.Expect(GoMemLimit(own)).To(Equal("80MiB"))
	g.Expect(GoMemLimit(corev1.ResourceRequirements{})).To(Equal(""))
}
