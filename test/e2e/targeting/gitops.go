package targeting

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/test/chartrepo"
)

// GitOpsSpec runs the whole manager chain: a git repository served over
// HTTP on loopback, a GitRepo, its Bundles, and the BundleDeployments of
// clusters labelled by env. Call it in an Ordered container.
func GitOpsSpec(ctx context.Context, inputGetter func() SpecInput) {
	const wsNS = "gitops"
	var admin client.Client
	var repo *gittest.Repo
	var server *gittest.Server

	bdsFor := func(bundle string) map[string]*fleet.BundleDeployment {
		GinkgoHelper()
		return deploymentsByCluster(ctx, admin, &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: bundle, Namespace: wsNS}})
	}

	BeforeAll(func() {
		input := inputGetter()
		input.validate("GitOpsSpec")
		admin = input.Admin
		root := GinkgoT().TempDir()
		versions := []string{"1.0.0", "1.2.0", "2.0.0"}
		charts := make([]chartrepo.Chart, 0, len(versions))
		for _, v := range versions {
			charts = append(charts, chartrepo.Chart{Name: "remote-web", Version: v, Values: "replicas: 1\n",
				Templates: map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: remote}\ndata: {version: \"" + v + "\"}\n"}})
		}
		chartRepo, err := chartrepo.New(charts, chartrepo.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(chartRepo.Close)
		repo, err = gittest.NewRepo(root+"/examples", "main")
		Expect(err).NotTo(HaveOccurred())
		_, err = repo.Commit("examples", map[string]string{
			"plain/fleet.yaml": "defaultNamespace: plain\n",
			"plain/cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}\ndata: {a: b}\n",
			"helm/Chart.yaml":  "apiVersion: v2\nname: web\nversion: 0.1.0\n",
			"helm/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n" +
				"data: {replicas: \"{{ .Values.replicas }}\", cluster: \"{{ .Values.cluster }}\"}\n",
			"helm/fleet.yaml": "defaultNamespace: web\nhelm:\n  values:\n    replicas: 1\n    cluster: ${ .ClusterName }\n" +
				"targetCustomizations:\n- name: prod\n  clusterSelector: {matchLabels: {env: prod}}\n  helm: {values: {replicas: 5}}\n",
			"remote/fleet.yaml":                         "defaultNamespace: remote\nhelm:\n  repo: " + chartRepo.URL + "\n  chart: remote-web\n  version: ^1.0.0\n",
			"kustomize/base/kustomization.yaml":         "resources: [cm.yaml]\n",
			"kustomize/base/cm.yaml":                    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: k}\n",
			"kustomize/overlays/dev/kustomization.yaml": "resources: [../../base]\nnamePrefix: dev-\n",
			"kustomize/fleet.yaml": "targetCustomizations:\n- name: dev\n  clusterSelector: {matchLabels: {env: dev}}\n  kustomize: {dir: overlays/dev}\n" +
				"- name: not-test\n  clusterSelector: {matchLabels: {env: test}}\n  doNotDeploy: true\n",
		})
		Expect(err).NotTo(HaveOccurred())
		server = gittest.NewServer(root)
		DeferCleanup(server.Close)

		Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: wsNS}})).To(Succeed())
		for _, env := range []string{"dev", "test", "prod"} {
			Expect(admin.Create(ctx, &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "g-" + env, Namespace: wsNS,
				Labels: map[string]string{"env": env}}})).To(Succeed())
		}
	})

	It("deploys every example bundle to the clusters its targets select", func() {
		gr := &fleet.GitRepo{
			ObjectMeta: metav1.ObjectMeta{Name: "examples", Namespace: wsNS},
			Spec: fleet.GitRepoSpec{
				Repo: server.RepoURL("examples"), Branch: "main",
				PollingInterval: &metav1.Duration{Duration: time.Second},
				Targets: []fleet.GitTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"dev", "test", "prod"}}}}}},
			},
		}
		Expect(admin.Create(ctx, gr)).To(Succeed())

		Eventually(func(g Gomega) {
			g.Expect(bdsFor("examples-plain")).To(HaveLen(3))
			g.Expect(bdsFor("examples-helm")).To(HaveLen(3))
			g.Expect(bdsFor("examples-kustomize")).To(HaveLen(2), "test is excluded by doNotDeploy")
			g.Expect(bdsFor("examples-remote")).To(HaveLen(3))
		}, 60*time.Second, 200*time.Millisecond).Should(Succeed())

		helm := bdsFor("examples-helm")
		Expect(helm["g-prod"].Spec.Options.Helm.Values.Data).To(HaveKeyWithValue("replicas", float64(5)))
		Expect(helm["g-dev"].Spec.Options.Helm.Values.Data).To(HaveKeyWithValue("replicas", float64(1)))
		Expect(helm["g-dev"].Spec.Options.Helm.Values.Data).To(HaveKeyWithValue("cluster", "g-dev"))
		Expect(helm["g-dev"].Spec.Options.DefaultNamespace).To(Equal("web"))
		kust := bdsFor("examples-kustomize")
		Expect(kust["g-dev"].Spec.Options.Kustomize.Dir).To(Equal("overlays/dev"))
		Expect(kust).NotTo(HaveKey("g-test"))

		By("the remote chart is fetched at build time, newest match of ^1.0.0, and shipped in the bundle")
		remote := &fleet.Bundle{}
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: wsNS, Name: "examples-remote"}, remote)).To(Succeed())
		Expect(remote.Spec.Helm.Repo).To(BeEmpty(), "the agent needs no access to the chart repository")
		var chartYAML string
		for _, r := range remote.Spec.Resources {
			if r.Name == remote.Spec.Helm.Chart+"/Chart.yaml" {
				chartYAML = r.Content
			}
		}
		Expect(chartYAML).To(ContainSubstring("version: 1.2.0"))

		b := &fleet.Bundle{}
		Expect(admin.Get(ctx, client.ObjectKey{Namespace: wsNS, Name: "examples-helm"}, b)).To(Succeed())
		Expect(b.Labels).To(HaveKeyWithValue(fleet.RepoLabel, "examples"))
		Expect(b.Labels).To(HaveKey(fleet.CommitLabel))
	})

	It("follows a push by polling, and deleting the GitRepo removes everything it created", func() {
		_, err := repo.Commit("more replicas", map[string]string{
			"helm/fleet.yaml": "defaultNamespace: web\nhelm:\n  values:\n    replicas: 2\n    cluster: ${ .ClusterName }\n",
		})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			g.Expect(bdsFor("examples-helm")["g-prod"].Spec.Options.Helm.Values.Data).To(HaveKeyWithValue("replicas", float64(2)))
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())

		Eventually(func(g Gomega) {
			gr := &fleet.GitRepo{}
			g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: wsNS, Name: "examples"}, gr)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(gr.Status.Conditions, fleet.ConditionAccepted)).To(BeTrue())
			g.Expect(gr.Status.Commit).NotTo(BeEmpty())
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())

		Expect(admin.Delete(ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "examples", Namespace: wsNS}})).To(Succeed())
		Eventually(func(g Gomega) {
			bundles := &fleet.BundleList{}
			g.Expect(admin.List(ctx, bundles, client.InNamespace(wsNS))).To(Succeed())
			g.Expect(bundles.Items).To(BeEmpty())
			for _, name := range []string{"examples-plain", "examples-helm", "examples-kustomize", "examples-remote"} {
				g.Expect(bdsFor(name)).To(BeEmpty())
			}
		}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
	})
}
