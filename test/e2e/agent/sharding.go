package agent

import (
	"context"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/test/framework"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// The shards of ShardingSpec: the suite's manager serves the default one;
// the spec starts a second manager for shardB; no manager serves
// shardNobody.
const (
	shardB      = "shard-b"
	shardNobody = "shard-nobody"
)

// shardRepos are the GitRepos of ShardingSpec by the shard they are
// labelled with ("" for none); each deploys a ConfigMap of its own name.
var shardRepos = map[string]string{"sharded-default": "", "sharded-b": shardB, "sharded-nobody": shardNobody}

// shardingFixture is what ShardingSpec's steps share.
type shardingFixture struct {
	ctx      context.Context
	admin    client.Client
	clusters []*cluster
	git      *gittest.Server
	// shardCache is the cache of the shardB manager.
	shardCache cache.Cache
}

// ShardingSpec runs two managers on one management cluster, as Fleet's
// sharding does: the suite's (the default shard) and one started with
// --shard-id shard-b. Three GitRepos target both downstream clusters, whose
// real agents deploy what they are given: the unlabelled one is deployed
// by the default shard, the one labelled fleet.cattle.io/shard-ref=shard-b
// by the second manager (its Bundle and BundleDeployments carry the label,
// and that manager's cache holds nothing of the other shards), and the one
// labelled with a shard no manager serves is deployed nowhere: it gets no
// finalizer, no status and no Bundle, until it is labelled with shard-b:
// then it moves to the second manager and is deployed.
//
// It joins the suite's two downstream clusters again with agents of its
// own in a system namespace of its own, so that it runs before or after
// the others, or alone; it removes what it made when done. Call it in an
// Ordered container.
func ShardingSpec(ctx context.Context, inputGetter func() SpecInput) {
	f := &shardingFixture{ctx: ctx}
	BeforeAll(func() { f.setUp(inputGetter()) })
	It("deploys each GitRepo by its shard's manager, and a GitRepo of an unknown shard nowhere", f.deploysByShard)
}

func (f *shardingFixture) setUp(input SpecInput) {
	input.validate("ShardingSpec")
	f.admin = input.Admin
	for i, stage := range []string{"shard-dev", "shard-prod"} {
		j := &cluster{ctx: f.ctx}
		j.JoinedCluster = e2e.Join(f.ctx, e2e.JoinInput{Upstream: input.Upstream, Downstream: input.Downstreams[i], Admin: f.admin,
			LogDir: input.LogDir, SystemNamespace: "sharding-system", AgentArgs: agentArgs(),
			ConfigArgs: []string{"--client-id", "sharding-" + stage, "-l", "sharding=" + stage},
		}, registerTimeout)
		f.clusters = append(f.clusters, j)
	}
	DeferCleanup(func() {
		for _, j := range f.clusters {
			j.StopAgents()
			Expect(client.IgnoreNotFound(f.admin.Delete(f.ctx, j.Cluster))).To(Succeed())
		}
	})

	// The second manager, as the chart deploys one per entry of shards.
	cfg := rest.CopyConfig(input.Upstream.Config)
	stop, c, err := framework.StartManagerWithCache(f.ctx, cfg, controllers.Options{ShardID: shardB, ContentGrace: 5 * time.Second,
		APIServerURL: cfg.Host, APIServerCA: cfg.CAData})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(stop)
	f.shardCache = c

	root, err := os.MkdirTemp("", "fleet-e2e-sharding-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, root)
	for name := range shardRepos {
		repo, err := gittest.NewRepo(filepath.Join(root, name), "main")
		Expect(err).NotTo(HaveOccurred())
		_, err = repo.Commit("one ConfigMap", map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: " + name +
			"\n  namespace: default\ndata:\n  repo: " + name + "\n"})
		Expect(err).NotTo(HaveOccurred())
	}
	f.git = gittest.NewServer(root)
	DeferCleanup(f.git.Close)
}

// gitRepo is the GitRepo name, labelled with shard unless it is empty.
func (f *shardingFixture) gitRepo(name, shard string) *fleet.GitRepo {
	gr := &fleet.GitRepo{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ws},
		Spec: fleet.GitRepoSpec{Repo: f.git.RepoURL(name), Branch: "main", PollingInterval: &metav1.Duration{Duration: 2 * time.Second},
			Targets: []fleet.GitTarget{{Name: "sharding", ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "sharding", Operator: metav1.LabelSelectorOpExists}}}}}},
	}
	if shard != "" {
		gr.Labels = map[string]string{fleet.ShardRefLabel: shard}
	}
	return gr
}

// configMapOn reads the ConfigMap name on j: nil when it is not there.
func (f *shardingFixture) configMapOn(g Gomega, j *cluster, name string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{}
	err := j.Local.Get(f.ctx, types.NamespacedName{Namespace: "default", Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	g.Expect(err).NotTo(HaveOccurred())
	return cm
}

func (f *shardingFixture) deploysByShard() {
	for name, shard := range shardRepos {
		gr := f.gitRepo(name, shard)
		Expect(f.admin.Create(f.ctx, gr)).To(Succeed())
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(f.admin.Delete(f.ctx, gr))).To(Succeed())
			e2e.WaitFor("GitRepo "+gr.Name+" and its ConfigMaps to be removed", func(g Gomega) {
				err := f.admin.Get(f.ctx, client.ObjectKeyFromObject(gr), &fleet.GitRepo{})
				g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "GitRepo %s: %v", gr.Name, err)
				for _, j := range f.clusters {
					g.Expect(f.configMapOn(g, j, gr.Name)).To(BeNil(), "ConfigMap %s on %s", gr.Name, j.Downstream.Name)
				}
			}, 90*time.Second, 250*time.Millisecond)
		})
	}

	By("the default shard's GitRepo and shard-b's are deployed to both clusters")
	for _, name := range []string{"sharded-default", "sharded-b"} {
		for _, j := range f.clusters {
			j.waitState(name, fleet.Ready, 3*time.Minute)
			e2e.WaitFor("ConfigMap "+name+" on "+j.Downstream.Name, func(g Gomega) {
				cm := f.configMapOn(g, j, name)
				g.Expect(cm).NotTo(BeNil())
				g.Expect(cm.Data).To(Equal(map[string]string{"repo": name}))
			}, time.Minute, 250*time.Millisecond)
		}
	}

	By("shard-b's Bundle and BundleDeployments carry its shard; the default shard's carry none")
	for name, shard := range map[string]string{"sharded-default": "", "sharded-b": shardB} {
		b := &fleet.Bundle{}
		Expect(f.admin.Get(f.ctx, types.NamespacedName{Namespace: ws, Name: name}, b)).To(Succeed())
		for _, obj := range []client.Object{b, f.clusters[0].bd(name), f.clusters[1].bd(name)} {
			if shard == "" {
				Expect(obj.GetLabels()).NotTo(HaveKey(fleet.ShardRefLabel), "%T %s", obj, obj.GetName())
			} else {
				Expect(obj.GetLabels()).To(HaveKeyWithValue(fleet.ShardRefLabel, shard), "%T %s", obj, obj.GetName())
			}
		}
	}

	By("shard-b's manager holds only shard-b's GitRepos, Bundles and BundleDeployments")
	repos := &fleet.GitRepoList{}
	Expect(f.shardCache.List(f.ctx, repos, client.InNamespace(ws))).To(Succeed())
	held := make([]string, 0, len(repos.Items))
	for _, r := range repos.Items {
		held = append(held, r.Name)
	}
	Expect(held).To(ConsistOf("sharded-b"))
	bds := &fleet.BundleDeploymentList{}
	Expect(f.shardCache.List(f.ctx, bds)).To(Succeed())
	Expect(bds.Items).NotTo(BeEmpty())
	for _, bd := range bds.Items {
		Expect(bd.Labels).To(HaveKeyWithValue(fleet.ShardRefLabel, shardB), "BundleDeployment %s/%s", bd.Namespace, bd.Name)
	}

	By("the GitRepo of a shard no manager serves is left alone: no finalizer, no status, no Bundle, nothing deployed")
	Consistently(func(g Gomega) {
		gr := &fleet.GitRepo{}
		g.Expect(f.admin.Get(f.ctx, types.NamespacedName{Namespace: ws, Name: "sharded-nobody"}, gr)).To(Succeed())
		g.Expect(gr.Finalizers).To(BeEmpty())
		g.Expect(gr.Status.Conditions).To(BeEmpty())
		err := f.admin.Get(f.ctx, types.NamespacedName{Namespace: ws, Name: "sharded-nobody"}, &fleet.Bundle{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "Bundle sharded-nobody: %v", err)
		for _, j := range f.clusters {
			g.Expect(f.configMapOn(g, j, "sharded-nobody")).To(BeNil(), "on %s", j.Downstream.Name)
		}
	}, 10*time.Second, 500*time.Millisecond).Should(Succeed())

	By("labelled with shard-b, the GitRepo of the unknown shard moves to shard-b's manager and is deployed")
	gr := &fleet.GitRepo{}
	Expect(f.admin.Get(f.ctx, types.NamespacedName{Namespace: ws, Name: "sharded-nobody"}, gr)).To(Succeed())
	patch := client.MergeFrom(gr.DeepCopy())
	gr.Labels[fleet.ShardRefLabel] = shardB
	Expect(f.admin.Patch(f.ctx, gr, patch)).To(Succeed())
	for _, j := range f.clusters {
		j.waitState("sharded-nobody", fleet.Ready, 3*time.Minute)
		e2e.WaitFor("ConfigMap sharded-nobody on "+j.Downstream.Name, func(g Gomega) {
			g.Expect(f.configMapOn(g, j, "sharded-nobody")).NotTo(BeNil())
		}, time.Minute, 250*time.Millisecond)
		Expect(j.bd("sharded-nobody").GetLabels()).To(HaveKeyWithValue(fleet.ShardRefLabel, shardB))
	}
}
