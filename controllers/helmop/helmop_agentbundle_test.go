package helmop

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// The Bundle of a HelmOp whose agents download the chart: no resources, the
// resolved versions, Fleet's helmOpOptions, named targets; the HelmOp is
// left as it was.
func TestAgentBundle(t *testing.T) {
	g := NewWithT(t)
	op := &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "app"}}
	op.Spec.Helm = &fleet.HelmOptions{Repo: "https://charts.example.com", Chart: "app", Version: "1.x", ReleaseName: "rel"}
	op.Spec.HelmSecretName, op.Spec.InsecureSkipTLSverify = "creds", true
	op.Spec.Resources = []fleet.BundleResource{{Name: "stray.yaml", Content: "x"}}
	op.Spec.ContentsID = "s-stray"
	op.Spec.HelmOpOptions = &fleet.BundleHelmOptions{SecretName: "someone-elses"}
	op.Spec.Targets = []fleet.BundleTarget{
		{ClusterGroup: "prod", BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Version: "2.x"}}},
		{Name: "rest", ClusterGroup: "default"},
	}
	before := op.DeepCopy()

	b := agentBundle(op, "1.4.0", map[int]string{0: "2.1.0"}, map[string]string{fleet.HelmOpLabel: "app"})
	g.Expect(b.Name).To(Equal("app"))
	g.Expect(b.Namespace).To(Equal("ws"))
	g.Expect(b.Labels).To(Equal(map[string]string{fleet.HelmOpLabel: "app"}))
	g.Expect(b.Spec.Resources).To(BeEmpty())
	g.Expect(b.Spec.ContentsID).To(BeEmpty())
	g.Expect(b.Spec.Helm.Version).To(Equal("1.4.0"))
	g.Expect(b.Spec.Helm.Repo).To(Equal("https://charts.example.com"))
	g.Expect(b.Spec.Helm.Chart).To(Equal("app"), "the chart's name in its repository, not a path in the bundle")
	g.Expect(b.Spec.HelmOpOptions).To(Equal(&fleet.BundleHelmOptions{SecretName: "creds", InsecureSkipTLSverify: true}))
	g.Expect(b.Spec.Targets).To(HaveLen(2))
	g.Expect(b.Spec.Targets[0].Name).To(Equal("target000"))
	g.Expect(b.Spec.Targets[0].Helm.Version).To(Equal("2.1.0"))
	g.Expect(b.Spec.Targets[1].Name).To(Equal("rest"))
	g.Expect(op).To(Equal(before), "the HelmOp is not changed")

	op.Spec.Targets = nil
	op.Spec.HelmSecretName, op.Spec.InsecureSkipTLSverify = "", false
	b = agentBundle(op, "1.4.0", nil, nil)
	g.Expect(b.Spec.Targets).To(Equal([]fleet.BundleTarget{{Name: fleet.DefaultTargetName, ClusterGroup: fleet.DefaultClusterGroup}}))
	g.Expect(b.Spec.HelmOpOptions).To(Equal(&fleet.BundleHelmOptions{}), "set without a Secret: the agents still download")
}
