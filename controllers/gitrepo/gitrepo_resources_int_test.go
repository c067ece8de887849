package gitrepo_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// createDeployment writes a BundleDeployment of a GitRepo's Bundle for
// cluster ws/<cluster> in a namespace of its own, as the bundle controller
// would, then its status, as the agent would.
func createDeployment(g *WithT, ns, repo, bundle, cluster string, status fleet.BundleDeploymentStatus) *fleet.BundleDeployment {
	clusterNS, err := env.CreateNamespace(ctx, "cluster-"+cluster)
	g.Expect(err).NotTo(HaveOccurred())
	bd := &fleet.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Name: bundle, Namespace: clusterNS.Name, Labels: map[string]string{
			fleet.BundleNameLabel: bundle, fleet.BundleNamespaceLabel: ns, fleet.RepoLabel: repo,
			fleet.ClusterLabel: cluster, fleet.ClusterNamespaceLabel: "ws",
		}},
		Spec: fleet.BundleDeploymentSpec{DeploymentID: "s-1:a", StagedDeploymentID: "s-1:a"},
	}
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
	}, eventually, poll).Should(Succeed())
}

// TestResourcesFromBundleDeployments: status.resources and
// status.resourceCounts (and perClusterResourceCounts) come from the
// GitRepo's BundleDeployments, in
// Fleet's shape, and follow their status changes; deployments of another
// GitRepo do not count.
func TestResourcesFromBundleDeployments(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	repo, _ := newGitRepo(g, ns+"-res", appFiles("one", "1"))
	createGitRepo(g, ns, "shapes", fleet.GitRepoSpec{Repo: repo.Dir, Paths: []string{"apps"}, PollingInterval: every(time.Hour)})
	g.Eventually(func() map[string]fleet.Bundle { return bundles(g, ns, "shapes") }, eventually, poll).Should(HaveKey("shapes-apps-one"))

	cm := fleet.BundleDeploymentResource{APIVersion: "v1", Kind: "ConfigMap", Namespace: "one", Name: "one"}
	web := fleet.BundleDeploymentResource{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "one", Name: "web"}
	ready := fleet.BundleDeploymentStatus{AppliedDeploymentID: "s-1:a", Ready: true, NonModified: true,
		Resources: []fleet.BundleDeploymentResource{cm, web}, ResourceCounts: fleet.ResourceCounts{DesiredReady: 2, Ready: 2}}
	notReady := *ready.DeepCopy()
	notReady.Ready = false
	notReady.NonReadyStatus = []fleet.NonReadyStatus{{APIVersion: "apps/v1", Kind: "Deployment", Namespace: "one", Name: "web",
		Summary: fleet.Summary{State: "updating", Transitioning: true, Message: []string{"0/1 available"}}}}
	notReady.ResourceCounts = fleet.ResourceCounts{DesiredReady: 2, Ready: 1, NotReady: 1}

	createDeployment(g, ns, "shapes", "shapes-apps-one", "a", ready)
	b := createDeployment(g, ns, "shapes", "shapes-apps-one", "b", notReady)
	createDeployment(g, ns, "other", "other-apps-one", "c", notReady)

	t.Log("listing each resource once, with its state on each cluster")
	g.Eventually(getGitRepo(g, ns, "shapes"), eventually, poll).Should(And(
		HaveField("Status.ResourceCounts", fleet.ResourceCounts{DesiredReady: 4, Ready: 3, NotReady: 1}),
		HaveField("Status.PerClusterResourceCounts", Equal(map[string]*fleet.ResourceCounts{
			"ws/a": {DesiredReady: 2, Ready: 2}, "ws/b": {DesiredReady: 2, Ready: 1, NotReady: 1}})),
		HaveField("Status.Resources", Equal([]fleet.GitRepoResource{
			{APIVersion: "apps/v1", Kind: "Deployment", Type: "apps.deployment", ID: "one/web", Namespace: "one", Name: "web",
				State: "updating", Transitioning: true, Message: "0/1 available",
				PerClusterState: fleet.PerClusterState{Ready: []string{"ws/a"}, NotReady: []string{"ws/b"}}},
			{APIVersion: "v1", Kind: "ConfigMap", Type: "configmap", ID: "one/one", Namespace: "one", Name: "one",
				State: "Ready", PerClusterState: fleet.PerClusterState{Ready: []string{"ws/a", "ws/b"}}},
		})),
	))

	t.Log("following a deployment's status when its Bundle's does not change")
	setDeploymentStatus(g, b, ready)
	g.Eventually(getGitRepo(g, ns, "shapes"), eventually, poll).Should(And(
		HaveField("Status.ResourceCounts", fleet.ResourceCounts{DesiredReady: 4, Ready: 4}),
		HaveField("Status.PerClusterResourceCounts", HaveKeyWithValue("ws/b", &fleet.ResourceCounts{DesiredReady: 2, Ready: 2})),
		HaveField("Status.Resources", HaveEach(And(HaveField("State", "Ready"), HaveField("PerClusterState.Ready", []string{"ws/a", "ws/b"})))),
	))
}
