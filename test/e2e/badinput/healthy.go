package badinput

import (
	"os"
	"path/filepath"
	"sort"
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
)

// The healthy fleet every bad input must leave alone: the GitRepo "healthy"
// with two bundles, deployed to two clusters without agent (the test reports
// their status once, as their agents would; after that nothing but the
// manager writes their BundleDeployments, so resourceVersions must not move
// at all) and to the cluster with the real agent (whose status the agent
// writes: there spec and generation must not move, and the deployment must
// stay Ready).
const healthyRepo = "healthy"

// healthyBundles are the Bundles of the healthy GitRepo.
func healthyBundles() []string { return []string{"healthy-helm", "healthy-plain"} }

// healthyClusters are the healthy fleet's Clusters without an agent.
func healthyClusters() []string { return []string{"healthy-1", "healthy-2"} }

// healthyFiles are the files of the healthy repository.
func healthyFiles() map[string]string {
	return map[string]string{
		"plain/fleet.yaml": "defaultNamespace: healthy-plain\n",
		"plain/cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: plain}\ndata: {a: b}\n",
		"helm/Chart.yaml":  "apiVersion: v2\nname: web\nversion: 0.1.0\n",
		"helm/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: web}\n" +
			"data: {cluster: \"{{ .Values.cluster }}\"}\n",
		"helm/fleet.yaml": "defaultNamespace: healthy-helm\nhelm:\n  values:\n    cluster: ${ .ClusterName }\n",
	}
}

// startHealthy creates the healthy fleet's clusters, repository and GitRepo.
func (f *fixture) startHealthy() {
	for _, name := range healthyClusters() {
		Expect(f.admin.Create(f.ctx, &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ws,
			Labels: map[string]string{"env": "healthy"}}})).To(Succeed())
	}
	var err error
	f.healthyGit, err = gittest.NewRepo(filepath.Join(f.gitRoot, healthyRepo), "main")
	Expect(err).NotTo(HaveOccurred())
	_, err = f.healthyGit.Commit("healthy", healthyFiles())
	Expect(err).NotTo(HaveOccurred())
	Expect(f.admin.Create(f.ctx, &fleet.GitRepo{
		ObjectMeta: metav1.ObjectMeta{Name: healthyRepo, Namespace: ws},
		Spec: fleet.GitRepoSpec{
			Repo: f.gitServer.RepoURL(healthyRepo), Branch: "main", PollingInterval: every(pollingInterval),
			Targets: []fleet.GitTarget{{Name: "healthy-and-agent", ClusterSelector: &metav1.LabelSelector{
				MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"healthy", agentEnv}}},
			}}},
		},
	})).To(Succeed())
}

// waitHealthy waits for the healthy fleet to be deployed everywhere and ready,
// and takes the snapshot every bad input is checked against.
func (f *fixture) waitHealthy() {
	Eventually(func(g Gomega) {
		for _, b := range healthyBundles() {
			bds := f.deploymentsOf(b)
			g.Expect(bds).To(HaveLen(3), "bundle %s", b)
			bd := bds[f.agentCluster.Name]
			g.Expect(summary.State(bd)).To(Equal(fleet.Ready), "%s on the agent's cluster: %s\nagent log:\n%s", b, summary.Message(bd), f.agent.Tail(4000))
		}
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
	// The clusters without agent report once, as their agents would.
	for _, b := range healthyBundles() {
		for cluster, bd := range f.deploymentsOf(b) {
			if cluster == f.agentCluster.Name {
				continue
			}
			patch := client.MergeFrom(bd.DeepCopy())
			bd.Status.AppliedDeploymentID, bd.Status.Ready, bd.Status.NonModified = bd.Spec.DeploymentID, true, true
			Expect(f.admin.Status().Patch(f.ctx, bd, patch)).To(Succeed())
		}
	}
	Eventually(func(g Gomega) {
		gr := f.getGitRepo(ws, healthyRepo)
		g.Expect(meta.IsStatusConditionTrue(gr.Status.Conditions, fleet.ConditionAccepted)).To(BeTrue())
		g.Expect(meta.IsStatusConditionTrue(gr.Status.Conditions, fleet.ConditionReady)).To(BeTrue(), "%+v", gr.Status.Conditions)
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
	cm := &corev1.ConfigMap{}
	Expect(f.local.Get(f.ctx, types.NamespacedName{Namespace: "healthy-helm", Name: "web"}, cm)).To(Succeed())
	Expect(cm.Data).To(HaveKeyWithValue("cluster", f.agentCluster.Name))
	f.healthy = f.takeSnapshot()
}

// pollingInterval of the healthy GitRepo: it keeps polling all along, so a
// bad input that confused it would show.
const pollingInterval = time.Second

// snapshot is what must not change in the healthy fleet.
type snapshot struct {
	gitRepoGeneration int64
	commit            string
	bundles           map[string]objectState // by name
	deployments       map[string]objectState // by namespace/name
}

type objectState struct {
	resourceVersion string // compared only where nothing but the manager writes
	generation      int64
	deploymentID    string
	labels          map[string]string
}

func (f *fixture) takeSnapshot() snapshot {
	GinkgoHelper()
	gr := f.getGitRepo(ws, healthyRepo)
	s := snapshot{gitRepoGeneration: gr.Generation, commit: gr.Status.Commit,
		bundles: map[string]objectState{}, deployments: map[string]objectState{}}
	for name, b := range f.bundlesOf(ws, healthyRepo) {
		s.bundles[name] = objectState{generation: b.Generation, labels: b.Labels}
	}
	for _, b := range healthyBundles() {
		for cluster, bd := range f.deploymentsOf(b) {
			st := objectState{generation: bd.Generation, deploymentID: bd.Spec.DeploymentID, labels: bd.Labels}
			if cluster != f.agentCluster.Name {
				st.resourceVersion = bd.ResourceVersion
			}
			s.deployments[bd.Namespace+"/"+bd.Name] = st
		}
	}
	return s
}

// expectUndisturbed checks the healthy fleet against the snapshot taken
// before any bad input: the same objects, unchanged, still accepted and
// ready, the agent's deployments still Ready.
func (f *fixture) expectUndisturbed() {
	GinkgoHelper()
	now := f.takeSnapshot()
	Expect(now).To(Equal(f.healthy), "the healthy GitRepo, its Bundles and BundleDeployments changed")
	gr := f.getGitRepo(ws, healthyRepo)
	Expect(meta.IsStatusConditionTrue(gr.Status.Conditions, fleet.ConditionAccepted)).To(BeTrue(), "healthy GitRepo: %+v", gr.Status.Conditions)
	Expect(meta.IsStatusConditionTrue(gr.Status.Conditions, fleet.ConditionReady)).To(BeTrue(), "healthy GitRepo: %+v", gr.Status.Conditions)
	Expect(gr.Status.WebhookCommit).To(BeEmpty(), "no webhook call was valid")
	for _, b := range healthyBundles() {
		bd := f.deploymentsOf(b)[f.agentCluster.Name]
		Expect(summary.State(bd)).To(Equal(fleet.Ready), "%s on the agent's cluster: %s", b, summary.Message(bd))
	}
}

// Helpers shared by the surfaces.

func (f *fixture) getGitRepo(ns, name string) *fleet.GitRepo {
	GinkgoHelper()
	gr := &fleet.GitRepo{}
	Expect(f.admin.Get(f.ctx, types.NamespacedName{Namespace: ns, Name: name}, gr)).To(Succeed())
	return gr
}

// bundlesOf returns the Bundles of a GitRepo by name.
func (f *fixture) bundlesOf(ns, repo string) map[string]fleet.Bundle {
	GinkgoHelper()
	list := &fleet.BundleList{}
	Expect(f.admin.List(f.ctx, list, client.InNamespace(ns), client.MatchingLabels{fleet.RepoLabel: repo})).To(Succeed())
	out := map[string]fleet.Bundle{}
	for _, b := range list.Items {
		out[b.Name] = b
	}
	return out
}

// deploymentsOf returns the BundleDeployments of a bundle in the default
// workspace by cluster name.
func (f *fixture) deploymentsOf(bundle string) map[string]*fleet.BundleDeployment {
	GinkgoHelper()
	list := &fleet.BundleDeploymentList{}
	Expect(f.admin.List(f.ctx, list, client.MatchingLabels{fleet.BundleNameLabel: bundle, fleet.BundleNamespaceLabel: ws})).To(Succeed())
	out := map[string]*fleet.BundleDeployment{}
	for i := range list.Items {
		out[list.Items[i].Labels[fleet.ClusterLabel]] = &list.Items[i]
	}
	return out
}

func keys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (f *fixture) notFound(obj client.Object) bool {
	GinkgoHelper()
	err := f.admin.Get(f.ctx, client.ObjectKeyFromObject(obj), obj)
	if err != nil && !apierrors.IsNotFound(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	return apierrors.IsNotFound(err)
}

// conditionOf returns the condition t, or an empty one.
func conditionOf(conds []metav1.Condition, t string) metav1.Condition {
	if c := meta.FindStatusCondition(conds, t); c != nil {
		return *c
	}
	return metav1.Condition{}
}

func containsAll(subs ...string) OmegaMatcher {
	ms := make([]OmegaMatcher, 0, len(subs))
	for _, s := range subs {
		ms = append(ms, ContainSubstring(s))
	}
	return And(ms...)
}

func writeTree(dir string, files, links map[string]string) {
	GinkgoHelper()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		Expect(os.MkdirAll(filepath.Dir(p), 0o755)).To(Succeed())
		Expect(os.WriteFile(p, []byte(content), 0o644)).To(Succeed())
	}
	for name, target := range links {
		p := filepath.Join(dir, filepath.FromSlash(name))
		Expect(os.MkdirAll(filepath.Dir(p), 0o755)).To(Succeed())
		Expect(os.Symlink(target, p)).To(Succeed())
	}
}
