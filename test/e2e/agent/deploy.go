package agent

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

const webDeployment = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    # Manifests are not templates: this must reach the cluster as written.
    note: "{{ not a template }}"
spec:
  replicas: 1
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: web
        image: nginx:1.27
`

const appConfig = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app-config}\ndata: {color: blue}\n"

// markAvailable does what the kube-controller-manager and kubelets would:
// the Deployment's status says its replicas are available.
func markAvailable(j *cluster, ns, name string) {
	GinkgoHelper()
	Eventually(func() error {
		d := &appsv1.Deployment{}
		if err := j.Local.Get(j.ctx, types.NamespacedName{Namespace: ns, Name: name}, d); err != nil {
			return err
		}
		d.Status = appsv1.DeploymentStatus{
			ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1,
			Conditions: []appsv1.DeploymentCondition{{Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue,
				Reason: "MinimumReplicasAvailable", LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()}},
		}
		return j.Local.Status().Update(j.ctx, d)
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
}

// deploySpecs check that plain manifests, Helm charts and Kustomize overlays
// reach the clusters their bundles select.
func deploySpecs(f *fixture) {
	ctx, dev, prod := f.ctx, f.dev, f.prod

	It("deploys plain manifests to the selected cluster and judges readiness from the objects", func() {
		f.newBundle("plain", fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "plain", CreateNamespace: ptr.To(true),
				NamespaceLabels: map[string]string{"team": "web"}},
			Resources: []fleet.BundleResource{res("cm.yaml", appConfig), res("deploy.yaml", webDeployment), res("README.md", "# docs")},
			Targets:   target("env", "dev"),
		})
		bd := dev.waitState("plain", fleet.NotReady, 60*time.Second)
		Expect(bd.Status.NonReadyStatus).To(ContainElement(And(
			HaveField("Kind", "Deployment"), HaveField("Name", "web"), HaveField("Namespace", "plain"))))
		Expect(bd.Status.Release).To(Equal("plain/plain:1"))
		Expect(bd.Status.AppliedDeploymentID).To(Equal(bd.Spec.DeploymentID))
		Expect(bd.Status.ResourceCounts.DesiredReady).To(Equal(2))

		Expect(configMap(dev, "plain", "app-config").Data).To(HaveKeyWithValue("color", "blue"))
		d := &appsv1.Deployment{}
		Expect(dev.Local.Get(ctx, types.NamespacedName{Namespace: "plain", Name: "web"}, d)).To(Succeed())
		Expect(d.Annotations).To(HaveKeyWithValue("note", "{{ not a template }}"))
		ns := &corev1.Namespace{}
		Expect(dev.Local.Get(ctx, types.NamespacedName{Name: "plain"}, ns)).To(Succeed())
		Expect(ns.Labels).To(HaveKeyWithValue("team", "web"))
		Expect(prod.bd("plain")).To(BeNil(), "not targeted at prod")
		Expect(configMap(prod, "plain", "app-config")).To(BeNil())

		markAvailable(dev, "plain", "web")
		dev.waitState("plain", fleet.Ready, 30*time.Second)
		Eventually(f.bundleReady("plain"), 30*time.Second, 250*time.Millisecond).Should(Succeed())
	})

	It("deploys a Helm chart with per-cluster values to every cluster", func() {
		f.newBundle("chart", fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "chart", CreateNamespace: ptr.To(true),
				Helm: &fleet.HelmOptions{ReleaseName: "greeter", Values: &fleet.GenericMap{Data: map[string]interface{}{
					"cluster": "${ .ClusterName }", "greeting": "hello"}}}},
			Resources: []fleet.BundleResource{
				res("Chart.yaml", "apiVersion: v2\nname: greeter\nversion: 0.1.0\n"),
				res("values.yaml", "greeting: hi\ncluster: none\nsize: small\n"),
				res("templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n"+
					"data:\n  cluster: {{ .Values.cluster | quote }}\n  greeting: {{ .Values.greeting }}\n  size: {{ .Values.size }}\n"),
			},
			Targets: []fleet.BundleTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "env", Operator: metav1.LabelSelectorOpExists}}}}},
		})
		for _, j := range []*cluster{dev, prod} {
			bd := j.waitState("chart", fleet.Ready, 60*time.Second)
			Expect(bd.Status.Release).To(Equal("chart/greeter:1"))
			cm := configMap(j, "chart", "greeter")
			Expect(cm.Data).To(Equal(map[string]string{"cluster": j.Cluster.Name, "greeting": "hello", "size": "small"}))
		}
		Eventually(f.bundleReady("chart"), 30*time.Second, 250*time.Millisecond).Should(Succeed())
	})

	It("deploys a Kustomize overlay", func() {
		f.newBundle("kust", fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "kust", CreateNamespace: ptr.To(true),
				Kustomize: &fleet.KustomizeOptions{Dir: "overlays/prod"}},
			Resources: []fleet.BundleResource{
				res("base/kustomization.yaml", "resources: [cm.yaml]\n"),
				res("base/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {replicas: \"1\", tier: base}\n"),
				res("overlays/prod/kustomization.yaml", "resources: [../../base]\nnamePrefix: prod-\npatches:\n- path: cm_patch.yaml\n"),
				res("overlays/prod/cm_patch.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: settings}\ndata: {replicas: \"3\"}\n"),
			},
			Targets: target("env", "prod"),
		})
		prod.waitState("kust", fleet.Ready, 60*time.Second)
		Expect(configMap(prod, "kust", "prod-settings").Data).To(Equal(map[string]string{"replicas": "3", "tier": "base"}))
		Expect(dev.bd("kust")).To(BeNil())
	})
}

// driftSpecs check that objects changed downstream are reported, and
// corrected when the bundle asks for it.
func driftSpecs(f *fixture) {
	ctx, dev := f.ctx, f.dev

	It("reports objects changed, deleted or added downstream as Modified", func() {
		cm := configMap(dev, "plain", "app-config")
		cm.Data["color"] = "red"
		Expect(dev.Local.Update(ctx, cm)).To(Succeed())
		bd := dev.waitState("plain", fleet.Modified, 20*time.Second)
		Expect(bd.Status.ModifiedStatus).To(ConsistOf(fleet.ModifiedStatus{
			Kind: "ConfigMap", APIVersion: "v1", Namespace: "plain", Name: "app-config", Patch: `{"data":{"color":"blue"}}`}))
		Expect(bd.Status.NonModified).To(BeFalse())

		Expect(dev.Local.Delete(ctx, cm)).To(Succeed())
		Eventually(func() []fleet.ModifiedStatus { return dev.bd("plain").Status.ModifiedStatus }, 20*time.Second, 250*time.Millisecond).
			Should(ConsistOf(HaveField("Create", true)))

		extra := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "stray", Namespace: "plain", Labels: map[string]string{
			"fleet.cattle.io/release-name": "plain", "fleet.cattle.io/release-namespace": "plain"}}}
		Expect(dev.Local.Create(ctx, extra)).To(Succeed())
		Eventually(func() []fleet.ModifiedStatus { return dev.bd("plain").Status.ModifiedStatus }, 20*time.Second, 250*time.Millisecond).
			Should(ConsistOf(HaveField("Create", true), And(HaveField("Name", "stray"), HaveField("Delete", true))))
	})

	It("corrects drift when correctDrift is enabled", func() {
		f.updateBundle("plain", func(b *fleet.Bundle) { b.Spec.CorrectDrift = &fleet.CorrectDrift{Enabled: true} })
		dev.waitState("plain", fleet.Ready, 30*time.Second)
		Expect(configMap(dev, "plain", "app-config").Data).To(HaveKeyWithValue("color", "blue"))
		Expect(configMap(dev, "plain", "stray")).To(BeNil())

		// From now on an edit is reverted as soon as it is seen.
		cm := configMap(dev, "plain", "app-config")
		cm.Data["color"] = "green"
		Expect(dev.Local.Update(ctx, cm)).To(Succeed())
		Eventually(func() string { return configMap(dev, "plain", "app-config").Data["color"] }, 20*time.Second, 100*time.Millisecond).
			Should(Equal("blue"))
		dev.waitState("plain", fleet.Ready, 20*time.Second)
	})
}

// deployFailureSpecs check that failures are reported without stopping other
// bundles, and that a deleted bundle's objects go (or stay, with
// keepResources).
func deployFailureSpecs(f *fixture) {
	ctx, dev, prod := f.ctx, f.dev, f.prod

	It("reports a chart that fails to render and an object the API server rejects, and still deploys other bundles", func() {
		f.newBundle("broken-chart", fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "broken", CreateNamespace: ptr.To(true)},
			Resources: []fleet.BundleResource{
				res("Chart.yaml", "apiVersion: v2\nname: broken\nversion: 0.1.0\n"),
				res("templates/cm.yaml", `{{ fail "this chart is broken on purpose" }}`),
			},
			Targets: target("env", "dev"),
		})
		f.newBundle("rejected", fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "rejected", CreateNamespace: ptr.To(true)},
			Resources:               []fleet.BundleResource{res("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: Bad_Name}\n")},
			Targets:                 target("env", "dev"),
		})
		f.newBundle("good", fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "good", CreateNamespace: ptr.To(true)},
			Resources:               []fleet.BundleResource{res("cm.yaml", appConfig)},
			Targets:                 target("env", "dev"),
		})
		bd := dev.waitState("broken-chart", fleet.ErrApplied, 60*time.Second)
		Expect(bd.Status.Display.Deployed).To(ContainSubstring("this chart is broken on purpose"))
		bd = dev.waitState("rejected", fleet.ErrApplied, 60*time.Second)
		Expect(bd.Status.Display.Deployed).To(And(ContainSubstring("Bad_Name"), ContainSubstring("invalid")))
		dev.waitState("good", fleet.Ready, 60*time.Second)
		Expect(configMap(dev, "good", "app-config")).NotTo(BeNil())
		Eventually(func(g Gomega) {
			b := &fleet.Bundle{}
			g.Expect(f.admin.Get(ctx, types.NamespacedName{Namespace: ws, Name: "rejected"}, b)).To(Succeed())
			g.Expect(b.Status.Display.State).To(Equal(string(fleet.ErrApplied)))
		}, 30*time.Second, 250*time.Millisecond).Should(Succeed())
	})

	It("removes a deleted bundle's objects, unless keepResources", func() {
		f.newBundle("kept", fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "kept", CreateNamespace: ptr.To(true), KeepResources: true},
			Resources:               []fleet.BundleResource{res("cm.yaml", appConfig)},
			Targets:                 target("env", "dev"),
		})
		dev.waitState("kept", fleet.Ready, 60*time.Second)
		for _, name := range []string{"chart", "kept", "broken-chart", "rejected"} {
			Expect(f.admin.Delete(ctx, &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: name}})).To(Succeed())
		}
		Eventually(func() bool {
			return configMap(dev, "chart", "greeter") == nil && configMap(prod, "chart", "greeter") == nil
		}, 60*time.Second, 250*time.Millisecond).Should(BeTrue(), "agent log:\n%s", dev.Agent.Tail(6000))
		Consistently(func() *corev1.ConfigMap { return configMap(dev, "kept", "app-config") }, 3*time.Second, 500*time.Millisecond).
			ShouldNot(BeNil())
		// The release records are gone too: nothing is left to remove later.
		Eventually(func() int {
			list := &corev1.SecretList{}
			Expect(dev.Local.List(ctx, list, client.MatchingLabels{"owner": "helm"}, client.InNamespace("kept"))).To(Succeed())
			n := len(list.Items)
			Expect(dev.Local.List(ctx, list, client.MatchingLabels{"owner": "helm"}, client.InNamespace("broken"))).To(Succeed())
			return n + len(list.Items)
		}, 30*time.Second, 250*time.Millisecond).Should(BeZero())
		err := dev.Local.Get(ctx, types.NamespacedName{Namespace: "chart", Name: "greeter"}, &corev1.ConfigMap{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue())
	})
}
