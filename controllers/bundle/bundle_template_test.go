package bundle_test

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/names"
)

// Two clusters with different labels and templateValues get the same bundle
// with different Helm values, rendered by the manager as Fleet renders them;
// a label changed later renders again.
func TestValuesRenderedPerCluster(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "tpl")
	g.Expect(err).NotTo(HaveOccurred())
	mkCluster := func(name string, labels map[string]string, replicas int) string {
		c := &fleet.Cluster{
			ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns.Name, Labels: labels},
			Spec:       fleet.ClusterSpec{TemplateValues: &fleet.GenericMap{Data: map[string]interface{}{"replicas": replicas}}},
		}
		g.Expect(env.CreateAndWait(ctx, c)).To(Succeed())
		clusterNS := names.ClusterNamespace(ns.Name, name)
		g.Expect(env.CreateAndWait(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: clusterNS}})).To(Succeed())
		return clusterNS
	}
	devNS := mkCluster("dev", map[string]string{"app": "web", "env": "dev", "region": "us"}, 1)
	prodNS := mkCluster("prod", map[string]string{"app": "web", "env": "prod", "region": "eu"}, 3)

	b := &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns.Name},
		Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{
				Values: &fleet.GenericMap{Data: map[string]interface{}{
					"cluster":  "${ .ClusterName }",
					"replicas": "${ .ClusterValues.replicas }",
					"big":      `${ if eq .ClusterLabels.env "prod" }true${ else }false${ end }`,
					"region":   "global.fleet.clusterLabels.region",
				}},
				TemplateValues: map[string]string{"host": `${ printf "%s.%s.example.com" .ClusterName .ClusterLabels.region | quote }`},
			}},
			Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n"}},
			Targets:   []fleet.BundleTarget{{Name: "web", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}}}},
		},
	}
	g.Expect(env.Create(ctx, b)).To(Succeed())

	valuesIn := func(clusterNS string) func(g Gomega) map[string]interface{} {
		return func(g Gomega) map[string]interface{} {
			bd := &fleet.BundleDeployment{}
			g.Expect(env.Get(ctx, client.ObjectKey{Namespace: clusterNS, Name: "web"}, bd)).To(Succeed())
			g.Expect(bd.Spec.Options.Helm).NotTo(BeNil())
			g.Expect(bd.Spec.Options.Helm.Values).NotTo(BeNil())
			return bd.Spec.Options.Helm.Values.Data
		}
	}
	g.Eventually(valuesIn(devNS)).WithTimeout(timeout).Should(Equal(map[string]interface{}{
		"cluster": "dev", "replicas": float64(1), "big": false, "region": "us", "host": "dev.us.example.com",
	}))
	g.Eventually(valuesIn(prodNS)).WithTimeout(timeout).Should(Equal(map[string]interface{}{
		"cluster": "prod", "replicas": float64(3), "big": true, "region": "eu", "host": "prod.eu.example.com",
	}))
	deploymentID := func(clusterNS string) string {
		bd := &fleet.BundleDeployment{}
		g.Expect(env.Get(ctx, client.ObjectKey{Namespace: clusterNS, Name: "web"}, bd)).To(Succeed())
		return bd.Spec.DeploymentID
	}
	g.Expect(deploymentID(devNS)).NotTo(Equal(deploymentID(prodNS)), "different values, different deployments")

	// A label changed on the Cluster renders its values again.
	dev := &fleet.Cluster{}
	g.Expect(env.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: "dev"}, dev)).To(Succeed())
	dev.Labels["region"] = "ap"
	g.Expect(env.Update(ctx, dev)).To(Succeed())
	g.Eventually(valuesIn(devNS)).WithTimeout(timeout).Should(Equal(map[string]interface{}{
		"cluster": "dev", "replicas": float64(1), "big": false, "region": "ap", "host": "dev.ap.example.com",
	}))
}

// A template calling a function Fleet removes fails the bundle with a message
// that starts as Fleet's does ("targeting error: ") and names the function,
// and deploys nothing.
func TestRefusedTemplateFunctionStalls(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns, err := env.CreateNamespace(ctx, "tplbad")
	g.Expect(err).NotTo(HaveOccurred())
	clusterNS := newCluster(ctx, g, ns.Name, "one")
	b := &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "bad", Namespace: ns.Name},
		Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{
				Values: &fleet.GenericMap{Data: map[string]interface{}{"home": `${ env "HOME" }`}},
			}},
			Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: bad\n"}},
			Targets:   []fleet.BundleTarget{{Name: "test", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "test"}}}},
		},
	}
	g.Expect(env.Create(ctx, b)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := &fleet.Bundle{}
		g.Expect(env.Get(ctx, client.ObjectKeyFromObject(b), got)).To(Succeed())
		c := conditions.Get(got, fleet.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		// Fleet's text first ("targeting error: "), ours after it.
		g.Expect(c.Message).To(HavePrefix("targeting error: "))
		g.Expect(c.Message).To(ContainSubstring(`function "env" is not allowed in values templates`))
	}).WithTimeout(timeout).Should(Succeed())
	bds := &fleet.BundleDeploymentList{}
	g.Expect(env.List(ctx, bds, client.InNamespace(clusterNS))).To(Succeed())
	g.Expect(bds.Items).To(BeEmpty())
}
