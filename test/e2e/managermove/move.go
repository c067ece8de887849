package managermove

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
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/registration"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	internalregistration "github.com/gitfleet/fleet/internal/registration"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

const (
	repoName = "moving"
	// bundle is the Bundle the GitRepo's one path makes; its ConfigMap,
	// named app, lands in the default namespace downstream.
	bundle = repoName + "-app"
	// releaseNS holds the deployed objects and Helm's release records.
	releaseNS = "default"
)

// agentArgs make the agents quick to notice what these specs change.
var agentArgs = []string{"--checkin-interval", "2s", "--min-backoff", "100ms", "--max-backoff", "2s",
	"--bootstrap-check-interval", "500ms", "--manager-address-check-interval", "1s"}

// manager is one fleet-manager process and the control plane it runs on,
// reached by agents through a proxy whose URL is its address.
type manager struct {
	cp      *controlplane.ControlPlane
	admin   client.Client
	proxy   *framework.Proxy
	process *framework.Process
}

// startManager starts the real fleet-manager on cp, telling agents to
// reach it at url.
func startManager(in SpecInput, cp *controlplane.ControlPlane, name, url string) *framework.Process {
	GinkgoHelper()
	caFile := filepath.Join(in.LogDir, cp.Name+"-ca.crt")
	Expect(os.WriteFile(caFile, cp.Config.CAData, 0o600)).To(Succeed())
	// No agent Bundles: nothing here runs the pods of an agent Deployment
	// (the agents are processes), so an agent Bundle would never be Ready
	// and the Clusters never Ready; test/e2e/agentupgrade covers them.
	p, err := framework.StartManagerProcess(in.LogDir, name, "--kubeconfig", cp.Kubeconfig, "--api-server-url", url,
		"--api-server-ca-file", caFile, "--webhook-bind-address", "", "--local-cluster=false", "--agent-bundles=false",
		// The git server listens on loopback.
		framework.EgressAllowLoopbackArgs[0], framework.EgressAllowLoopbackArgs[1])
	Expect(err).NotTo(HaveOccurred())
	return p
}

// MoveSpec brings up a manager at URL A with agents on two clusters and a
// GitRepo deployed to both, then rebuilds the manager on a second control
// plane at URL B with the same GitRepo, stops the first one (its address
// goes away) and places a bootstrap of the new manager beside each agent:
// the agents register there by themselves and report Ready, one of them
// after the new manager was unreachable when its bootstrap was placed.
// Throughout, the objects deployed downstream and Helm's release records
// are never deleted or installed again. Then the new manager's own URL
// changes to C while B still works: the agents follow it, B goes away, and
// new commits keep arriving. Call it in an Ordered container.
func MoveSpec(ctx context.Context, inputGetter func() SpecInput) {
	var (
		in                SpecInput
		repo              *gittest.Repo
		gitServer         *gittest.Server
		first, rebuilt    *manager
		joined            []*e2e.JoinedCluster
		releasesBefore    []map[string]types.UID
		configMapsBefore  []*corev1.ConfigMap
		deletions         []*e2e.DeletionWatch
		round             int
		proxyC            *framework.Proxy
		rebuiltProcessOld *framework.Process
	)

	commit := func() {
		GinkgoHelper()
		round++
		_, err := repo.Commit(fmt.Sprintf("round %d", round), map[string]string{
			"app/cm.yaml": fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {round: \"%d\"}\n", round),
		})
		Expect(err).NotTo(HaveOccurred())
	}
	gitRepo := func(admin client.Client) {
		GinkgoHelper()
		Expect(admin.Create(ctx, &fleet.GitRepo{
			ObjectMeta: metav1.ObjectMeta{Name: repoName, Namespace: fleet.DefaultWorkspace},
			Spec: fleet.GitRepoSpec{
				Repo: gitServer.RepoURL(repoName), Branch: "main", Paths: []string{"app"},
				PollingInterval: &metav1.Duration{Duration: time.Second},
				Targets: []fleet.GitTarget{{Name: "movers", ClusterSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{"move": "yes"}}}},
			},
		})).To(Succeed())
	}
	// converged checks that the cluster's agent applied the current round
	// as the manager admin sees it, and that it is there downstream.
	converged := func(admin client.Client, j *e2e.JoinedCluster) func(Gomega) {
		return func(g Gomega) {
			list := &fleet.BundleDeploymentList{}
			g.Expect(admin.List(ctx, list, client.InNamespace(j.Cred.ClusterNamespace), client.MatchingLabels{fleet.BundleNameLabel: bundle})).To(Succeed())
			g.Expect(list.Items).To(HaveLen(1), "the BundleDeployment of %s", j.Cred.ClusterNamespace)
			bd := list.Items[0]
			g.Expect(bd.Spec.DeploymentID).NotTo(BeEmpty())
			g.Expect(bd.Status.AppliedDeploymentID).To(Equal(bd.Spec.DeploymentID), "%s applied", bd.Namespace)
			g.Expect(bd.Status.Ready).To(BeTrue(), "%s ready", bd.Namespace)
			cm := &corev1.ConfigMap{}
			g.Expect(j.Local.Get(ctx, types.NamespacedName{Namespace: releaseNS, Name: "app"}, cm)).To(Succeed())
			g.Expect(cm.Data).To(HaveKeyWithValue("round", fmt.Sprint(round)))
		}
	}
	// registeredAt waits until the cluster's agent has stored a credential
	// for the manager at url, then reads it and its Cluster there.
	registeredAt := func(j *e2e.JoinedCluster, m *manager, url string) {
		GinkgoHelper()
		j.Admin = m.admin
		e2e.WaitFor(fmt.Sprintf("the agent of %s to store a credential for %s", j.Downstream.Name, url), func(g Gomega) {
			cred, err := registration.LoadStored(ctx, j.Local, fleet.DefaultSystemNamespace)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cred).NotTo(BeNil())
			g.Expect(cred.APIServerURL).To(Equal(url), "agent log:\n%s", j.Agent.Tail(3000))
		}, 90*time.Second, 200*time.Millisecond)
		j.WaitRegistered(ctx, 10*time.Second)
	}
	// checksIn waits for the cluster's agent to check in at m after t.
	checksIn := func(j *e2e.JoinedCluster, m *manager, t time.Time) {
		GinkgoHelper()
		e2e.WaitFor(fmt.Sprintf("the agent of %s to check in at %s", j.Downstream.Name, m.cp.Name), func(g Gomega) {
			c := &fleet.Cluster{}
			g.Expect(m.admin.Get(ctx, client.ObjectKeyFromObject(j.Cluster), c)).To(Succeed())
			// A check-in renews the agent's Lease; lastSeen follows it only
			// when something shown changes.
			last, err := checkin.LastOf(ctx, m.admin, c)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(last).To(BeTemporally(">", t))
		}, 30*time.Second, 200*time.Millisecond)
	}
	// unchanged checks that nothing deployed downstream was deleted or
	// installed again since the first deploy: the ConfigMap and every Helm
	// release record are the same objects, and no deletion was seen.
	unchanged := func() {
		GinkgoHelper()
		for i, j := range joined {
			cm := &corev1.ConfigMap{}
			Expect(j.Local.Get(ctx, types.NamespacedName{Namespace: releaseNS, Name: "app"}, cm)).To(Succeed())
			Expect(cm.UID).To(Equal(configMapsBefore[i].UID), "%s: the same ConfigMap", j.Downstream.Name)
			now := releases(ctx, j.Local)
			for name, uid := range releasesBefore[i] {
				Expect(now).To(HaveKeyWithValue(name, uid), "%s: Helm release record %s kept", j.Downstream.Name, name)
			}
			Expect(deletions[i].Seen()).To(BeEmpty(), "%s: nothing deployed was deleted", j.Downstream.Name)
			AddReportEntry(j.Downstream.Name, fmt.Sprintf("ConfigMap resourceVersion %s -> %s; Helm release records %d -> %d",
				configMapsBefore[i].ResourceVersion, cm.ResourceVersion, len(releasesBefore[i]), len(now)))
		}
	}

	BeforeAll(func() {
		in = inputGetter()
		in.validate("MoveSpec")
		root := GinkgoT().TempDir()
		var err error
		repo, err = gittest.NewRepo(filepath.Join(root, repoName), "main")
		Expect(err).NotTo(HaveOccurred())
		commit()
		gitServer = gittest.NewServer(root)
		DeferCleanup(gitServer.Close)
		first, rebuilt = &manager{cp: in.Managers[0]}, &manager{cp: in.Managers[1]}
		for _, m := range []*manager{first, rebuilt} {
			m.admin, err = m.cp.Client(controllers.Scheme())
			Expect(err).NotTo(HaveOccurred())
			m.proxy, err = framework.NewProxy(m.cp.Config.Host)
			Expect(err).NotTo(HaveOccurred())
			// Closed again when a spec closed it already: no error then.
			DeferCleanup(func() { _ = m.proxy.Close() })
		}
		DeferCleanup(func() {
			for _, j := range joined {
				j.StopAgents()
			}
			for _, w := range deletions {
				w.Stop()
			}
			for _, p := range []*framework.Process{first.process, rebuilt.process, rebuiltProcessOld} {
				p.Stop()
			}
		})
	})

	It("deploys a GitRepo to two clusters through the first manager at URL A", func() {
		first.process = startManager(in, first.cp, "manager-a", first.proxy.URL)
		gitRepo(first.admin)
		for _, w := range in.Workloads {
			joined = append(joined, e2e.Join(ctx, e2e.JoinInput{Upstream: first.cp, Downstream: w, Admin: first.admin, LogDir: in.LogDir,
				ConfigArgs: []string{"-l", "move=yes"}, APIServerURL: first.proxy.URL, AgentArgs: agentArgs}, 60*time.Second))
		}
		for _, j := range joined {
			e2e.WaitFor("round 1 deployed to "+j.Downstream.Name, converged(first.admin, j), 90*time.Second, 200*time.Millisecond)
			cm := &corev1.ConfigMap{}
			Expect(j.Local.Get(ctx, types.NamespacedName{Namespace: releaseNS, Name: "app"}, cm)).To(Succeed())
			configMapsBefore = append(configMapsBefore, cm)
			rel := releases(ctx, j.Local)
			Expect(rel).NotTo(BeEmpty(), "the bundle is a Helm release downstream")
			releasesBefore = append(releasesBefore, rel)
			wc, err := client.NewWithWatch(j.Downstream.Config, client.Options{Scheme: registration.Scheme()})
			Expect(err).NotTo(HaveOccurred())
			deletions = append(deletions, e2e.WatchDeletions(ctx, wc, e2e.DeletionScope{Namespace: releaseNS,
				Kinds: []client.ObjectList{&corev1.ConfigMapList{}, &corev1.SecretList{}}}))
		}
	})

	It("rebuilds the manager on a new control plane at URL B with the same GitRepo, and stops the first one", func() {
		rebuilt.process = startManager(in, rebuilt.cp, "manager-b", rebuilt.proxy.URL)
		gitRepo(rebuilt.admin)
		e2e.WaitFor("the rebuilt manager to make the bundle from git", func(g Gomega) {
			g.Expect(rebuilt.admin.Get(ctx, types.NamespacedName{Namespace: fleet.DefaultWorkspace, Name: bundle}, &fleet.Bundle{})).To(Succeed())
		}, 60*time.Second, 200*time.Millisecond)

		By("stopping the first manager; its address goes away")
		first.process.Stop()
		Expect(first.proxy.Close()).To(Succeed())
		for _, j := range joined {
			cred, err := registration.LoadStored(ctx, j.Local, fleet.DefaultSystemNamespace)
			Expect(err).NotTo(HaveOccurred())
			Expect(cred.APIServerURL).To(Equal(first.proxy.URL), "%s still knows only the old manager", j.Downstream.Name)
		}
	})

	It("registers each agent with the new manager once its bootstrap is placed, even when the new manager is unreachable at first", func() {
		moved := time.Now()
		for _, j := range joined {
			j.Upstream, j.Admin, j.APIServerURL = rebuilt.cp, rebuilt.admin, rebuilt.proxy.URL
		}
		By("placing the bootstrap beside the second agent while URL B does not answer")
		late := joined[1]
		rebuilt.proxy.Cut()
		late.ApplyToken(ctx)
		e2e.WaitFor("the second agent to try the new bootstrap and go on with its old credential", func(g Gomega) {
			g.Expect(late.Agent.Output()).To(ContainSubstring("Could not register with the new bootstrap, going on with the stored credential"))
		}, 60*time.Second, 200*time.Millisecond)
		rebuilt.proxy.Restore()

		By("placing the bootstrap beside the first agent")
		joined[0].ApplyToken(ctx)

		for _, j := range joined {
			registeredAt(j, rebuilt, rebuilt.proxy.URL)
			checksIn(j, rebuilt, moved)
			e2e.WaitFor(j.Downstream.Name+" deployed by the new manager", converged(rebuilt.admin, j), 90*time.Second, 200*time.Millisecond)
			e2e.WaitFor(j.Downstream.Name+" Ready at the new manager", func(g Gomega) {
				c := &fleet.Cluster{}
				g.Expect(rebuilt.admin.Get(ctx, client.ObjectKeyFromObject(j.Cluster), c)).To(Succeed())
				g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, fleet.ConditionReady)).To(BeTrue(), "conditions: %v", c.Status.Conditions)
			}, 60*time.Second, 200*time.Millisecond)
			boot := &corev1.Secret{}
			err := j.Local.Get(ctx, types.NamespacedName{Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentBootstrapSecretName}, boot)
			Expect(client.IgnoreNotFound(err)).To(Succeed())
			Expect(err).To(HaveOccurred(), "%s: the token is forgotten once registered", j.Downstream.Name)
		}
		msg := fmt.Sprintf("both agents registered and deployed at the rebuilt manager %s after the first bootstrap was placed", time.Since(moved).Round(time.Millisecond))
		AddReportEntry("move", msg)
		fmt.Println(msg)
	})

	It("kept every release: nothing deployed was deleted or installed again", func() {
		unchanged()
	})

	It("delivers a new commit through the new manager", func() {
		commit()
		for _, j := range joined {
			e2e.WaitFor(fmt.Sprintf("round %d deployed to %s", round, j.Downstream.Name), converged(rebuilt.admin, j), 90*time.Second, 200*time.Millisecond)
		}
		unchanged()
	})

	It("follows the manager to a new URL of its own, before the old one goes away", func() {
		var err error
		proxyC, err = framework.NewProxy(rebuilt.cp.Config.Host)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = proxyC.Close() })

		By("restarting the manager with --api-server-url C while B still works")
		changed := time.Now()
		rebuilt.process.Stop()
		rebuiltProcessOld = rebuilt.process
		rebuilt.process = startManager(in, rebuilt.cp, "manager-b-at-c", proxyC.URL)
		tokens := map[string]string{}
		clusters := map[string]types.UID{}
		for _, j := range joined {
			tokens[j.Downstream.Name], clusters[j.Downstream.Name] = j.Cred.Token, j.Cluster.UID
		}
		for _, j := range joined {
			e2e.WaitFor("the manager to publish its new address to "+j.Cred.ClusterNamespace, func(g Gomega) {
				cm := &corev1.ConfigMap{}
				g.Expect(rebuilt.admin.Get(ctx, types.NamespacedName{Namespace: j.Cred.ClusterNamespace, Name: internalregistration.AddressConfigMap}, cm)).To(Succeed())
				g.Expect(cm.Data).To(HaveKeyWithValue(internalregistration.AddressURLKey, proxyC.URL))
			}, 60*time.Second, 200*time.Millisecond)
			registeredAt(j, rebuilt, proxyC.URL)
			Expect(j.Cred.Token).To(Equal(tokens[j.Downstream.Name]), "%s: the same credential, at the new address: no new registration", j.Downstream.Name)
			Expect(j.Cluster.UID).To(Equal(clusters[j.Downstream.Name]), "%s: the same Cluster", j.Downstream.Name)
		}
		msg := fmt.Sprintf("both agents follow the manager's new URL %s after its restart", time.Since(changed).Round(time.Millisecond))
		AddReportEntry("url change", msg)
		fmt.Println(msg)

		By("closing URL B: the agents carry on at C")
		Expect(rebuilt.proxy.Close()).To(Succeed())
		closed := time.Now()
		commit()
		for _, j := range joined {
			checksIn(j, rebuilt, closed)
			e2e.WaitFor(fmt.Sprintf("round %d deployed to %s", round, j.Downstream.Name), converged(rebuilt.admin, j), 90*time.Second, 200*time.Millisecond)
		}
		unchanged()
	})
}
