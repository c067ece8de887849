package helmop_test

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/target"
	"github.com/gitfleet/fleet/test/chartrepo"
)

// createDeployment writes the BundleDeployment of bundle for cluster
// ws/<cluster>, in a namespace of its own, built as the bundle controller
// builds it (so with the Bundle's labels), then its status, as the agent
// would.
func createDeployment(g *WithT, bundle *fleet.Bundle, cluster string, status fleet.BundleDeploymentStatus) *fleet.BundleDeployment {
	clusterNS, err := env.CreateNamespace(ctx, "cluster-"+cluster)
	g.Expect(err).NotTo(HaveOccurred())
	bd := target.BundleDeployment(bundle, "s-1", &target.Deployment{
		Cluster:   &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: cluster}},
		Namespace: clusterNS.Name, ID: "s-1:a", Options: &fleet.BundleDeploymentOptions{},
	})
	g.Expect(env.CreateAndWait(ctx, bd)).To(Succeed())
	setDeploymentStatus(g, bd, status)
	return bd
}

func setDeploymentStatus(g *WithT, bd *fleet.BundleDeployment, status fleet.BundleDeploymentStatus) {
	g.Eventually(func() error {
		cur := &fleet.BundleDeployment{}
		if err := env.Get(ctx, client.ObjectKeyFromObject(bd), cur); err != nil {
			return err
		}
		cur.Status = status
		return env.Status().Update(ctx, cur)
	}).WithTimeout(eventually).WithPolling(poll).Should(Succeed(), "the status of BundleDeployment %s written", bd.Name)
}

// TestHelmOpResourcesFromBundleDeployments: status.resources and
// status.resourceCounts come from the BundleDeployments of the HelmOp's
// Bundle, in Fleet's shape, and follow their status changes; deployments of
// another HelmOp, and of another Bundle carrying the HelmOp's label, do not
// count.
func TestHelmOpResourcesFromBundleDeployments(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	repo := newRepo(t, chartrepo.Options{}, "1.0.0")
	for _, name := range []string{"shapes", "other"} {
		g.Expect(env.Create(ctx, newHelmOp(ns, name, fleet.HelmOptions{Repo: repo.URL, Chart: "app", Version: "1.0.0"}))).To(Succeed())
		g.Eventually(bundleChartVersion(g, ns, name, "app")).WithTimeout(eventually).WithPolling(poll).Should(Equal("1.0.0"), "the bundle of HelmOp %s", name)
	}
	bundle := func(name string) *fleet.Bundle {
		b := &fleet.Bundle{}
		g.Expect(env.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, b)).To(Succeed())
		return b
	}

	cm := fleet.BundleDeploymentResource{APIVersion: "v1", Kind: "ConfigMap", Namespace: "one", Name: "app"}
	web := fleet.BundleDeploymentResource{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "one", Name: "web"}
	ready := fleet.BundleDeploymentStatus{AppliedDeploymentID: "s-1:a", Ready: true, NonModified: true,
		Resources: []fleet.BundleDeploymentResource{cm, web}, ResourceCounts: fleet.ResourceCounts{DesiredReady: 2, Ready: 2}}
	notReady := *ready.DeepCopy()
	notReady.Ready = false
	notReady.NonReadyStatus = []fleet.NonReadyStatus{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "one", Name: "web",
		Summary: fleet.Summary{State: "updating", Transitioning: true, Message: []string{"0/1 available"}}}}
	notReady.ResourceCounts = fleet.ResourceCounts{DesiredReady: 2, Ready: 1, NotReady: 1}

	shapes := bundle("shapes")
	createDeployment(g, shapes, "a", ready)
	b := createDeployment(g, shapes, "b", notReady)
	createDeployment(g, bundle("other"), "c", notReady)
	stray := shapes.DeepCopy()
	stray.Name = "stray"
	g.Expect(stray.Labels).To(HaveKeyWithValue(fleet.HelmOpLabel, "shapes"))
	createDeployment(g, stray, "d", notReady)

	t.Log("listing each resource once, with its state on each cluster")
	g.Eventually(getHelmOp(g, ns, "shapes")).WithTimeout(eventually).WithPolling(poll).Should(And(
		HaveField("Status.ResourceCounts", fleet.ResourceCounts{DesiredReady: 4, Ready: 3, NotReady: 1}),
		HaveField("Status.Resources", Equal([]fleet.GitRepoResource{
			{APIVersion: "apps/v1", Kind: "Deployment", Type: "apps.deployment", ID: "one/web", Namespace: "one", Name: "web",
				State: "updating", Transitioning: true, Message: "0/1 available",
				PerClusterState: fleet.PerClusterState{Ready: []string{"ws/a"}, NotReady: []string{"ws/b"}}},
			{APIVersion: "v1", Kind: "ConfigMap", Type: "configmap", ID: "one/app", Namespace: "one", Name: "app",
				State: "Ready", PerClusterState: fleet.PerClusterState{Ready: []string{"ws/a", "ws/b"}}},
		})),
	), "HelmOp shapes listing the resources of clusters a and b only")
	g.Eventually(getHelmOp(g, ns, "other")).WithTimeout(eventually).WithPolling(poll).Should(And(
		HaveField("Status.ResourceCounts", fleet.ResourceCounts{DesiredReady: 2, Ready: 1, NotReady: 1}),
		HaveField("Status.Resources", HaveEach(HaveField("PerClusterState", Or(
			Equal(fleet.PerClusterState{Ready: []string{"ws/c"}}), Equal(fleet.PerClusterState{NotReady: []string{"ws/c"}}))))),
		HaveField("Status.Resources", HaveLen(2)),
	), "HelmOp other listing the resources of cluster c only")

	t.Log("following a deployment's status when its Bundle's does not change")
	setDeploymentStatus(g, b, ready)
	g.Eventually(getHelmOp(g, ns, "shapes")).WithTimeout(eventually).WithPolling(poll).Should(And(
		HaveField("Status.ResourceCounts", fleet.ResourceCounts{DesiredReady: 4, Ready: 4}),
		HaveField("Status.Resources", HaveEach(And(HaveField("State", "Ready"), HaveField("PerClusterState.Ready", []string{"ws/a", "ws/b"})))),
	), "HelmOp shapes ready on clusters a and b")
}
