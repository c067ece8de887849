package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// monorepoApps is how many GitRepos (one app directory each) follow the
// repository of MonorepoSpec, spread over monorepoTenants.
const monorepoApps = 20

// monorepoTenants are the project namespaces, one git user each.
var monorepoTenants = []string{"monorepo-red", "monorepo-green", "monorepo-blue"}

// monorepoFiles are the repository's files: one directory per app, each a
// ConfigMap with value.
func monorepoFiles(value string) map[string]string {
	files := map[string]string{}
	for i := range monorepoApps {
		app := fmt.Sprintf("app%02d", i)
		files["apps/"+app+"/fleet.yaml"] = "defaultNamespace: monorepo\n"
		files["apps/"+app+"/cm.yaml"] = fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  value: %q\n", app, value)
	}
	return files
}

// MonorepoSpec deploys one repository through 20 GitRepos, one path each,
// in three project namespaces whose bundles a BundleNamespaceMapping sends
// to a cluster with a real agent. Each namespace reads the repository with
// credentials of its own (a git user each on one loopback server), and the
// server counts each user's requests: one fetch per commit and one ls-remote
// per polling interval per namespace, not per GitRepo. A GitRepo whose
// credentials the server refuses fails, though the other tenants' fetches of
// the same URL succeed. Call it in an Ordered container.
func MonorepoSpec(ctx context.Context, inputGetter func() SpecInput) {
	const (
		systemNamespace = "monorepo-system"
		interval        = 2 * time.Second
	)
	var (
		admin client.Client
		j     = &cluster{ctx: ctx}
		git   *gittest.Server
		repo  *gittest.Repo
	)
	BeforeAll(func() {
		input := inputGetter()
		input.validate("MonorepoSpec")
		admin = input.Admin
		j.JoinedCluster = e2e.Join(ctx, e2e.JoinInput{Upstream: input.Upstream, Downstream: input.Downstreams[0], Admin: admin,
			LogDir: input.LogDir, SystemNamespace: systemNamespace, AgentArgs: agentArgs(),
			ConfigArgs: []string{"--client-id", "monorepo", "-l", "monorepo=yes"},
		}, registerTimeout)
		DeferCleanup(func() {
			j.StopAgents()
			Expect(client.IgnoreNotFound(admin.Delete(ctx, j.Cluster))).To(Succeed())
		})

		root, err := os.MkdirTemp("", "fleet-e2e-monorepo-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, root)
		repo, err = gittest.NewRepo(filepath.Join(root, "mono"), "main")
		Expect(err).NotTo(HaveOccurred())
		_, err = repo.Commit("apps", monorepoFiles("1"))
		Expect(err).NotTo(HaveOccurred())
		git = gittest.NewServer(root)
		DeferCleanup(git.Close)

		for _, ns := range monorepoTenants {
			git.AddUser(ns, ns+"-pass")
			Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
			DeferCleanup(func() {
				Expect(client.IgnoreNotFound(admin.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))).To(Succeed())
			})
			Expect(admin.Create(ctx, &fleet.BundleNamespaceMapping{ObjectMeta: metav1.ObjectMeta{Name: "to-workspace", Namespace: ns},
				BundleSelector:    selector("monorepo", "yes"),
				NamespaceSelector: selector(corev1.LabelMetadataName, ws)})).To(Succeed())
			Expect(admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "git", Namespace: ns}, Type: corev1.SecretTypeBasicAuth,
				Data: map[string][]byte{"username": []byte(ns), "password": []byte(ns + "-pass")}})).To(Succeed())
		}
	})

	gitRepo := func(ns, name, path, secret string) *fleet.GitRepo {
		GinkgoHelper()
		gr := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"monorepo": "yes"}},
			Spec: fleet.GitRepoSpec{Repo: git.RepoURL("mono"), Branch: "main", Paths: []string{path}, ClientSecretName: secret,
				PollingInterval: &metav1.Duration{Duration: interval},
				Targets:         []fleet.GitTarget{{Name: "mono", ClusterSelector: selector("monorepo", "yes")}}}}
		Expect(admin.Create(ctx, gr)).To(Succeed())
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(admin.Delete(ctx, gr))).To(Succeed())
			e2e.WaitFor(fmt.Sprintf("the bundles of GitRepo %s/%s to be removed", ns, name), func(g Gomega) {
				list := &fleet.BundleList{}
				g.Expect(admin.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{fleet.RepoLabel: name})).To(Succeed())
				g.Expect(list.Items).To(BeEmpty())
			}, time.Minute, 250*time.Millisecond)
		})
		return gr
	}
	deployed := func(value string, timeout time.Duration) {
		GinkgoHelper()
		e2e.WaitFor("every app's ConfigMap with value "+value, func(g Gomega) {
			for i := range monorepoApps {
				app := fmt.Sprintf("app%02d", i)
				cm := configMap(j, "monorepo", app)
				g.Expect(cm).NotTo(BeNil(), "%s on the cluster", app)
				g.Expect(cm.Data).To(HaveKeyWithValue("value", value), app)
			}
		}, timeout, 250*time.Millisecond)
	}
	lsRemotes := func(c gittest.Counts) int64 { return c.Lists - c.Fetches }

	It("deploys 20 GitRepos of one repository with one fetch per commit and one ls-remote per interval per tenant; wrong credentials fail alone", func() {
		repos := make([]*fleet.GitRepo, 0, monorepoApps)
		for i := range monorepoApps {
			ns := monorepoTenants[i%len(monorepoTenants)]
			app := fmt.Sprintf("app%02d", i)
			repos = append(repos, gitRepo(ns, app, "apps/"+app, "git"))
		}
		deployed("1", 3*time.Minute)
		e2e.WaitFor("the 20 GitRepos Ready", func(g Gomega) {
			for _, gr := range repos {
				g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(gr), gr)).To(Succeed())
				g.Expect(meta.IsStatusConditionTrue(gr.Status.Conditions, fleet.ConditionReady)).To(BeTrue(), "%s/%s: %+v", gr.Namespace, gr.Name, gr.Status.Conditions)
			}
		}, time.Minute, 250*time.Millisecond)
		initial := map[string]gittest.Counts{}
		for _, ns := range monorepoTenants {
			initial[ns] = git.CountsOf(ns)
			// The first fetch is two POSTs: a shallow one, which go-git's
			// server does not take, then a full one.
			Expect(initial[ns].Fetches).To(BeNumerically("<=", 2), "one fetch of the first commit by %s", ns)
		}

		By("a tenant with wrong credentials for the same URL fails, and reads nothing")
		Expect(admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "guessed", Namespace: monorepoTenants[2]}, Type: corev1.SecretTypeBasicAuth,
			Data: map[string][]byte{"username": []byte(monorepoTenants[0]), "password": []byte("guessed")}})).To(Succeed())
		intruder := gitRepo(monorepoTenants[2], "intruder", "apps/app00", "guessed")
		e2e.WaitFor("the intruder refused", func(g Gomega) {
			g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(intruder), intruder)).To(Succeed())
			c := meta.FindStatusCondition(intruder.Status.Conditions, fleet.ConditionAccepted)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Message).To(ContainSubstring("authentication failed"))
		}, time.Minute, 250*time.Millisecond)
		list := &fleet.BundleList{}
		Expect(admin.List(ctx, list, client.InNamespace(monorepoTenants[2]), client.MatchingLabels{fleet.RepoLabel: "intruder"})).To(Succeed())
		Expect(list.Items).To(BeEmpty())

		By("polling: one ls-remote per interval per tenant, not one per GitRepo")
		before := map[string]gittest.Counts{}
		for _, ns := range monorepoTenants {
			before[ns] = git.CountsOf(ns)
		}
		const window = 10 * time.Second
		time.Sleep(window)
		for _, ns := range monorepoTenants {
			polls := lsRemotes(git.CountsOf(ns)) - lsRemotes(before[ns])
			GinkgoWriter.Printf("%s: %d ls-remotes in %s at a %s interval, for %d GitRepos\n", ns, polls, window, interval, monorepoApps/len(monorepoTenants))
			// At most one per (jittered, 0.9x) interval, and one in flight.
			Expect(polls).To(BeNumerically("<=", int64(window/(interval*9/10))+1), ns)
			Expect(polls).To(BeNumerically(">=", 2), ns)
			Expect(git.CountsOf(ns).Fetches).To(Equal(initial[ns].Fetches), "no fetch without a new commit")
		}

		By("a new commit: one fetch per tenant, every app updated")
		_, err := repo.Commit("value 2", monorepoFiles("2"))
		Expect(err).NotTo(HaveOccurred())
		deployed("2", 2*time.Minute)
		for _, ns := range monorepoTenants {
			Expect(git.CountsOf(ns).Fetches).To(Equal(initial[ns].Fetches+1), "one fetch of the new commit by %s", ns)
		}
		Expect(admin.Get(ctx, client.ObjectKeyFromObject(intruder), intruder)).To(Succeed())
		Expect(meta.IsStatusConditionFalse(intruder.Status.Conditions, fleet.ConditionAccepted)).To(BeTrue())
	})
}
