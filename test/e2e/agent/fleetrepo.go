package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/test/chartrepo"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// The repository of FleetRepoSpec, laid out as Fleet users lay theirs out:
// plain manifests at the root (no fleet.yaml: the root is a bundle of its
// own), and apps/greeter, a directory with a fleet.yaml deploying the local
// chart beside it, whose dependency comes from a chart repository.
const (
	fleetRepoName = "fleetrepo"
	// greeterChartDependency is the library chart the local chart depends on;
	// libVersions are the versions the chart repository serves, and
	// libWanted the one "^1.0.0" must resolve to: the highest 1.x.
	greeterChartDependency = "fleetlib"
	libWanted              = "1.4.2"
)

var libVersions = []string{"1.0.0", "1.3.0", libWanted, "2.0.0"}

// fleetRepoFiles are the repository's files; repoURL is the chart
// repository's.
func fleetRepoFiles(repoURL string) map[string]string {
	return map[string]string{
		"README.md": "# Our fleet\n",
		"configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: fleetrepo-root\n" +
			"data:\n  from: the repository root\n",
		"apps/greeter/fleet.yaml": `defaultNamespace: greeter
helm:
  chart: ./chart
  releaseName: greeter
  values:
    stage: ${ .ClusterLabels.stage }
    region: global.fleet.clusterLabels.region
    fleetlib:
      from: ${ .ClusterName }
  templateValues:
    greeting: "hello ${ .ClusterLabels.stage }"
targetCustomizations:
- name: dev
  clusterSelector:
    matchLabels: {stage: dev}
  helm:
    values: {tier: small, replicas: 1}
- name: prod
  clusterSelector:
    matchLabels: {stage: prod}
  helm:
    values: {tier: large, replicas: 3}
    templateValues:
      greeting: "welcome to ${ .ClusterLabels.region }"
`,
		"apps/greeter/chart/Chart.yaml": "apiVersion: v2\nname: greeter\nversion: 0.1.0\ndependencies:\n" +
			"- name: " + greeterChartDependency + "\n  version: ^1.0.0\n  repository: " + repoURL + "\n",
		"apps/greeter/chart/values.yaml": "stage: none\nregion: none\ntier: none\nreplicas: 0\ngreeting: none\n",
		"apps/greeter/chart/templates/cm.yaml": `apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}
data:
  stage: {{ .Values.stage | quote }}
  region: {{ .Values.region | quote }}
  tier: {{ .Values.tier | quote }}
  replicas: {{ .Values.replicas | quote }}
  greeting: {{ .Values.greeting | quote }}
`,
	}
}

// libChart is one version of the dependency: its ConfigMap tells which
// version was deployed and takes a value from the parent chart.
func libChart(version string) chartrepo.Chart {
	return chartrepo.Chart{Name: greeterChartDependency, Version: version, Values: "from: nobody\n",
		Templates: map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-lib\n" +
			"data:\n  version: \"" + version + "\"\n  from: {{ .Values.from | quote }}\n"}}
}

// FleetRepoSpec deploys a repository laid out Fleet's way, unchanged, to two
// clusters with real agents, each with its own values: root manifests; a
// nested fleet.yaml deploying a local chart whose dependency ("^1.0.0") the
// manager resolves from a chart repository on loopback; values from
// ${ .ClusterLabels } templates, global.fleet.clusterLabels and
// helm.templateValues; targetCustomizations for the dev and the prod
// cluster. It checks on each downstream cluster that the objects exist with
// that cluster's values and that the bundles turn Ready.
//
// It joins the suite's two downstream clusters again, with agents of its own
// in a system namespace of their own and labels no other spec uses (stage),
// so that it runs before or after the others, or alone; it removes what it
// made when done. Call it in an Ordered container.
func FleetRepoSpec(ctx context.Context, inputGetter func() SpecInput) {
	const systemNamespace = "fleetrepo-system"
	var (
		admin     client.Client
		dev, prod = &cluster{ctx: ctx}, &cluster{ctx: ctx}
		chartRepo *chartrepo.Repo
		git       *gittest.Server
	)
	clusters := func() []*cluster { return []*cluster{dev, prod} }
	stageOf := map[*cluster]string{dev: "dev", prod: "prod"}
	regionOf := map[*cluster]string{dev: "eu-west", prod: "us-east"}

	BeforeAll(func() {
		input := inputGetter()
		input.validate("FleetRepoSpec")
		admin = input.Admin
		for i, j := range clusters() {
			j.JoinedCluster = e2e.Join(ctx, e2e.JoinInput{Upstream: input.Upstream, Downstream: input.Downstreams[i], Admin: admin,
				LogDir: input.LogDir, SystemNamespace: systemNamespace, AgentArgs: agentArgs(),
				ConfigArgs: []string{"--client-id", "fleetrepo-" + stageOf[j], "-l", "stage=" + stageOf[j], "-l", "region=" + regionOf[j]},
			}, registerTimeout)
		}
		DeferCleanup(func() {
			for _, j := range clusters() {
				j.StopAgents()
				Expect(client.IgnoreNotFound(admin.Delete(ctx, j.Cluster))).To(Succeed())
			}
		})

		charts := make([]chartrepo.Chart, 0, len(libVersions))
		for _, v := range libVersions {
			charts = append(charts, libChart(v))
		}
		var err error
		chartRepo, err = chartrepo.New(charts, chartrepo.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(chartRepo.Close)

		root, err := os.MkdirTemp("", "fleet-e2e-fleetrepo-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, root)
		repo, err := gittest.NewRepo(filepath.Join(root, fleetRepoName), "main")
		Expect(err).NotTo(HaveOccurred())
		_, err = repo.Commit("our fleet", fleetRepoFiles(chartRepo.URL))
		Expect(err).NotTo(HaveOccurred())
		git = gittest.NewServer(root)
		DeferCleanup(git.Close)
	})

	bundleOf := func(name string) *fleet.Bundle {
		GinkgoHelper()
		b := &fleet.Bundle{}
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: ws, Name: name}, b)).To(Succeed())
		return b
	}

	It("deploys the repository to both clusters, each with its own values, and the bundles turn Ready", func() {
		gr := &fleet.GitRepo{
			ObjectMeta: metav1.ObjectMeta{Name: fleetRepoName, Namespace: ws},
			Spec: fleet.GitRepoSpec{Repo: git.RepoURL(fleetRepoName), Branch: "main",
				PollingInterval: &metav1.Duration{Duration: 2 * time.Second},
				Targets: []fleet.GitTarget{{Name: "staged", ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "stage", Operator: metav1.LabelSelectorOpIn, Values: []string{"dev", "prod"}}}}}},
			},
		}
		Expect(admin.Create(ctx, gr)).To(Succeed())
		DeferCleanup(func() {
			// Deleting the GitRepo removes its bundles, and the agents (still
			// running: cleanups run last in, first out) their releases.
			Expect(client.IgnoreNotFound(admin.Delete(ctx, gr))).To(Succeed())
			e2e.WaitFor("the fleetrepo bundles and releases to be removed", func(g Gomega) {
				list := &fleet.BundleList{}
				g.Expect(admin.List(ctx, list, client.InNamespace(ws), client.MatchingLabels{fleet.RepoLabel: fleetRepoName})).To(Succeed())
				g.Expect(list.Items).To(BeEmpty())
				for _, j := range clusters() {
					err := j.Local.Get(ctx, types.NamespacedName{Namespace: "greeter", Name: "greeter"}, &corev1.ConfigMap{})
					g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "greeter on %s: %v", j.Downstream.Name, err)
				}
			}, 90*time.Second, 250*time.Millisecond)
		})

		root, greeter := fleetRepoName, fleetRepoName+"-apps-greeter"
		for _, j := range clusters() {
			for _, b := range []string{root, greeter} {
				j.waitState(b, fleet.Ready, 3*time.Minute)
			}
		}

		By("the root ships the nested fleet.yaml directory's files too, as Fleet does; it is a bundle of its own all the same")
		rootResources := bundleOf(root).Spec.Resources
		rootFiles := make([]string, 0, len(rootResources))
		for _, r := range rootResources {
			rootFiles = append(rootFiles, r.Name)
		}
		Expect(rootFiles).To(ContainElements("configmap.yaml", "apps/greeter/fleet.yaml", "apps/greeter/chart/templates/cm.yaml"))

		By(fmt.Sprintf("the dependency ^1.0.0 resolved to %s, the highest 1.x served, at build time", libWanted))
		b := bundleOf(greeter)
		Expect(b.Spec.Helm.Repo).To(BeEmpty(), "the chart is shipped in the bundle: agents need no access to the chart repository")
		var lock string
		var archives []string
		for _, r := range b.Spec.Resources {
			switch {
			case strings.HasSuffix(r.Name, "/Chart.lock"):
				lock = r.Content
			case strings.Contains(r.Name, "/charts/"):
				archives = append(archives, r.Name)
			}
		}
		Expect(archives).To(ConsistOf(HaveSuffix("charts/" + greeterChartDependency + "-" + libWanted + ".tgz")))
		Expect(lock).To(ContainSubstring("version: " + libWanted))

		By("each cluster has the objects, with its own values")
		want := map[*cluster]map[string]string{
			dev:  {"stage": "dev", "region": "eu-west", "tier": "small", "replicas": "1", "greeting": "hello dev"},
			prod: {"stage": "prod", "region": "us-east", "tier": "large", "replicas": "3", "greeting": "welcome to us-east"},
		}
		for _, j := range clusters() {
			Expect(configMap(j, "greeter", "greeter")).NotTo(BeNil(), "on %s", j.Downstream.Name)
			Expect(configMap(j, "greeter", "greeter").Data).To(Equal(want[j]), "on %s", j.Downstream.Name)
			Expect(configMap(j, "greeter", "greeter-lib").Data).To(Equal(map[string]string{
				"version": libWanted, "from": j.Cluster.Name}), "the dependency on %s", j.Downstream.Name)
			Expect(configMap(j, "default", "fleetrepo-root").Data).To(Equal(map[string]string{"from": "the repository root"}))
			bd := j.bd(greeter)
			Expect(bd.Status.Release).To(Equal("greeter/greeter:1"))
		}

		By("the bundles and the GitRepo turn Ready")
		e2e.WaitFor("the fleetrepo bundles and GitRepo Ready", func(g Gomega) {
			for _, name := range []string{root, greeter} {
				b := &fleet.Bundle{}
				g.Expect(admin.Get(ctx, types.NamespacedName{Namespace: ws, Name: name}, b)).To(Succeed())
				g.Expect(b.Status.Summary.DesiredReady).To(Equal(2), "bundle %s", name)
				g.Expect(b.Status.Summary.Ready).To(Equal(2), "bundle %s: %+v", name, b.Status.Conditions)
				g.Expect(b.Status.Display.State).To(Equal(string(fleet.Ready)))
			}
			g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(gr), gr)).To(Succeed())
			g.Expect(meta.IsStatusConditionTrue(gr.Status.Conditions, fleet.ConditionReady)).To(BeTrue(), "%+v", gr.Status.Conditions)
		}, time.Minute, 250*time.Millisecond)
		for _, j := range clusters() {
			Expect(summary.State(j.bd(greeter))).To(Equal(fleet.Ready))
		}
	})
}
