package agent

import (
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/test/chartrepo"
)

// greeterChart is a version of a chart whose ConfigMap records the chart
// version it came from and a value.
func greeterChart(version string) chartrepo.Chart {
	return chartrepo.Chart{Name: "greeter", Version: version, Values: "greeting: hi\n",
		Templates: map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n" +
			"data:\n  version: {{ .Chart.Version | quote }}\n  greeting: {{ .Values.greeting }}\n"}}
}

// helmOpSpecs deploy a chart from a chart repository served on loopback to
// both clusters through a HelmOp, as a Fleet user writes it, and upgrade
// the release in place when the repository publishes a newer version that
// the HelmOp's constraint allows.
func helmOpSpecs(f *fixture) {
	ctx, dev, prod := f.ctx, f.dev, f.prod

	It("deploys a HelmOp's chart to both clusters, then upgrades the same release when a new version is published", func() {
		repo, err := chartrepo.New([]chartrepo.Chart{greeterChart("1.0.0"), greeterChart("2.0.0")}, chartrepo.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(repo.Close)

		op := &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Name: "helmop-greeter", Namespace: ws}}
		op.Spec.Helm = &fleet.HelmOptions{Repo: repo.URL, Chart: "greeter", Version: "1.x", ReleaseName: "greeter",
			Values: &fleet.GenericMap{Data: map[string]interface{}{"greeting": "hello ${ .ClusterName }"}}}
		op.Spec.DefaultNamespace, op.Spec.CreateNamespace = "helmop", ptr.To(true)
		op.Spec.PollingInterval = &metav1.Duration{Duration: time.Second}
		op.Spec.Targets = []fleet.BundleTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "env", Operator: metav1.LabelSelectorOpExists}}}}}
		Expect(f.admin.Create(ctx, op)).To(Succeed())

		for _, j := range []*cluster{dev, prod} {
			bd := j.waitState("helmop-greeter", fleet.Ready, 90*time.Second)
			Expect(bd.Status.Release).To(Equal("helmop/greeter:1"))
			Expect(configMap(j, "helmop", "greeter").Data).To(Equal(map[string]string{"version": "1.0.0", "greeting": "hello " + j.Cluster.Name}))
		}
		helmOpStatus := func(version string) func(Gomega) {
			return func(g Gomega) {
				got := &fleet.HelmOp{}
				g.Expect(f.admin.Get(ctx, types.NamespacedName{Namespace: ws, Name: "helmop-greeter"}, got)).To(Succeed())
				g.Expect(got.Status.Version).To(Equal(version))
				g.Expect(got.Status.Display.ReadyBundleDeployments).To(Equal("2/2"), "status: %+v", got.Status)
				g.Expect(got.Status.ReadyClusters).To(Equal(2))
				g.Expect(got.Status.DesiredReadyClusters).To(Equal(2))
				// One ConfigMap on each cluster, counted and listed in
				// Fleet's shape from the HelmOp's BundleDeployments.
				g.Expect(got.Status.ResourceCounts).To(Equal(fleet.ResourceCounts{DesiredReady: 2, Ready: 2}), "status: %+v", got.Status)
				g.Expect(got.Status.Resources).To(ConsistOf(And(HaveField("Type", "configmap"), HaveField("ID", "helmop/greeter"),
					HaveField("State", "Ready"), HaveField("PerClusterState.Ready", ConsistOf(
						dev.Cluster.Namespace+"/"+dev.Cluster.Name, prod.Cluster.Namespace+"/"+prod.Cluster.Name)))), "status: %+v", got.Status)
				for _, t := range []string{fleet.ConditionAccepted, fleet.ConditionPolled, fleet.ConditionReady} {
					g.Expect(got.Status.Conditions).To(ContainElement(And(HaveField("Type", t), HaveField("Status", metav1.ConditionTrue))), "%s: %+v", t, got.Status.Conditions)
				}
			}
		}
		Eventually(helmOpStatus("1.0.0"), 60*time.Second, 250*time.Millisecond).Should(Succeed(), "the HelmOp ready at 1.0.0 on both clusters")

		// A new version within the constraint is published: the manager
		// finds it at its next poll and every cluster upgrades the release.
		Expect(repo.Add(greeterChart("1.1.0"))).To(Succeed())
		for _, j := range []*cluster{dev, prod} {
			Eventually(func(g Gomega) {
				bd := j.bd("helmop-greeter")
				g.Expect(bd).NotTo(BeNil())
				g.Expect(bd.Status.Release).To(Equal("helmop/greeter:2"), "release of %s; agent log:\n%s", j.Downstream.Name, j.Agent.Tail(3000))
			}, 90*time.Second, 250*time.Millisecond).Should(Succeed(), "the release upgraded on %s", j.Downstream.Name)
			j.waitState("helmop-greeter", fleet.Ready, 60*time.Second)
			Expect(configMap(j, "helmop", "greeter").Data).To(HaveKeyWithValue("version", "1.1.0"))
			Expect(releaseStatuses(j, "helmop", "greeter")).To(Equal([]string{"1:superseded", "2:deployed"}), "the same release, revision 2")
		}
		Eventually(helmOpStatus("1.1.0"), 60*time.Second, 250*time.Millisecond).Should(Succeed(), "the HelmOp ready at 1.1.0 on both clusters")

		// Deleting the HelmOp removes the release everywhere.
		Expect(f.admin.Delete(ctx, op)).To(Succeed())
		for _, j := range []*cluster{dev, prod} {
			Eventually(func() bool {
				return j.bd("helmop-greeter") == nil && configMap(j, "helmop", "greeter") == nil
			}, 60*time.Second, 250*time.Millisecond).Should(BeTrue(), "the release gone from %s", j.Downstream.Name)
		}
		Eventually(func() bool {
			return apierrors.IsNotFound(f.admin.Get(ctx, types.NamespacedName{Namespace: ws, Name: "helmop-greeter"}, &fleet.Bundle{}))
		}, 30*time.Second, 250*time.Millisecond).Should(BeTrue(), "the bundle gone")
	})
}
