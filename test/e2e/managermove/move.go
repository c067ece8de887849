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

	"github.com/gitfleet/fleet/agent/kinds"
	"github.com/gitfleet/fleet/agent/upstream"
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

// moveState is what the steps of MoveSpec share.
type moveState struct {
	ctx               context.Context
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
	s := &moveState{ctx: ctx}

	BeforeAll(func() {
		s.in = inputGetter()
		s.in.validate("MoveSpec")
		root := GinkgoT().TempDir()
		var err error
		s.repo, err = gittest.NewRepo(filepath.Join(root, repoName), "main")
		Expect(err).NotTo(HaveOccurred())
		s.commit()
		s.gitServer = gittest.NewServer(root)
		DeferCleanup(s.gitServer.Close)
		s.first, s.rebuilt = &manager{cp: s.in.Managers[0]}, &manager{cp: s.in.Managers[1]}
		for _, m := range []*manager{s.first, s.rebuilt} {
			m.admin, err = m.cp.Client(controllers.Scheme())
			Expect(err).NotTo(HaveOccurred())
			m.proxy, err = framework.NewProxy(m.cp.Config.Host)
			Expect(err).NotTo(HaveOccurred())
			// Closed again when a spec closed it already: no error then.
			DeferCleanup(func() { _ = m.proxy.Close() })
		}
		DeferCleanup(func() {
			for _, j := range s.joined {
				j.StopAgents()
			}
			for _, w := range s.deletions {
				w.Stop()
			}
			for _, p := range []*framework.Process{s.first.process, s.rebuilt.process, s.rebuiltProcessOld} {
				p.Stop()
			}
		})
	})

	firstManagerSteps(s)
	reRegisterSteps(s)
	newURLSteps(s)
}

// firstManagerSteps: a GitRepo deploys through the first manager, which is
// then rebuilt on a new control plane at URL B.
func firstManagerSteps(s *moveState) {
	It("deploys a GitRepo to two clusters through the first manager at URL A", func() {
		s.first.process = startManager(s.in, s.first.cp, "manager-a", s.first.proxy.URL)
		s.gitRepo(s.first.admin)
		for _, w := range s.in.Workloads {
			s.joined = append(s.joined, e2e.Join(s.ctx, e2e.JoinInput{Upstream: s.first.cp, Downstream: w, Admin: s.first.admin, LogDir: s.in.LogDir,
				ConfigArgs: []string{"-l", "move=yes"}, APIServerURL: s.first.proxy.URL, AgentArgs: agentArgs}, 60*time.Second))
		}
		for _, j := range s.joined {
			e2e.WaitFor("round 1 deployed to "+j.Downstream.Name, s.converged(s.first.admin, j), 90*time.Second, 200*time.Millisecond)
			cm := &corev1.ConfigMap{}
			Expect(j.Local.Get(s.ctx, types.NamespacedName{Namespace: releaseNS, Name: "app"}, cm)).To(Succeed())
			s.configMapsBefore = append(s.configMapsBefore, cm)
			rel := releases(s.ctx, j.Local)
			Expect(rel).NotTo(BeEmpty(), "the bundle is a Helm release downstream")
			s.releasesBefore = append(s.releasesBefore, rel)
			wc, err := client.NewWithWatch(j.Downstream.Config, client.Options{Scheme: kinds.Scheme()})
			Expect(err).NotTo(HaveOccurred())
			s.deletions = append(s.deletions, e2e.WatchDeletions(s.ctx, wc, e2e.DeletionScope{Namespace: releaseNS,
				Kinds: []client.ObjectList{&corev1.ConfigMapList{}, &corev1.SecretList{}}}))
		}
	})

	It("rebuilds the manager on a new control plane at URL B with the same GitRepo, and stops the first one", func() {
		s.rebuilt.process = startManager(s.in, s.rebuilt.cp, "manager-b", s.rebuilt.proxy.URL)
		s.gitRepo(s.rebuilt.admin)
		e2e.WaitFor("the rebuilt manager to make the bundle from git", func(g Gomega) {
			g.Expect(s.rebuilt.admin.Get(s.ctx, types.NamespacedName{Namespace: fleet.DefaultWorkspace, Name: bundle}, &fleet.Bundle{})).To(Succeed())
		}, 60*time.Second, 200*time.Millisecond)

		By("stopping the first manager; its address goes away")
		s.first.process.Stop()
		Expect(s.first.proxy.Close()).To(Succeed())
		for _, j := range s.joined {
			cred, err := upstream.LoadStored(s.ctx, j.Local, fleet.DefaultSystemNamespace)
			Expect(err).NotTo(HaveOccurred())
			Expect(cred.APIServerURL).To(Equal(s.first.proxy.URL), "%s still knows only the old manager", j.Downstream.Name)
		}
	})
}

// reRegisterSteps: each agent registers with the new manager, nothing
// deployed is deleted or installed again, and new commits arrive.
func reRegisterSteps(s *moveState) {
	It("registers each agent with the new manager once its bootstrap is placed, even when the new manager is unreachable at first", func() {
		moved := time.Now()
		for _, j := range s.joined {
			j.Upstream, j.Admin, j.APIServerURL = s.rebuilt.cp, s.rebuilt.admin, s.rebuilt.proxy.URL
		}
		By("placing the bootstrap beside the second agent while URL B does not answer")
		late := s.joined[1]
		s.rebuilt.proxy.Cut()
		late.ApplyToken(s.ctx)
		e2e.WaitFor("the second agent to try the new bootstrap and go on with its old credential", func(g Gomega) {
			g.Expect(late.Agent.Output()).To(ContainSubstring("Could not register with the new bootstrap, going on with the stored credential"))
		}, 60*time.Second, 200*time.Millisecond)
		s.rebuilt.proxy.Restore()

		By("placing the bootstrap beside the first agent")
		s.joined[0].ApplyToken(s.ctx)

		for _, j := range s.joined {
			s.registeredAt(j, s.rebuilt, s.rebuilt.proxy.URL)
			s.checksIn(j, s.rebuilt, moved)
			e2e.WaitFor(j.Downstream.Name+" deployed by the new manager", s.converged(s.rebuilt.admin, j), 90*time.Second, 200*time.Millisecond)
			e2e.WaitFor(j.Downstream.Name+" Ready at the new manager", func(g Gomega) {
				c := &fleet.Cluster{}
				g.Expect(s.rebuilt.admin.Get(s.ctx, client.ObjectKeyFromObject(j.Cluster), c)).To(Succeed())
				g.Expect(meta.IsStatusConditionTrue(c.Status.Conditions, fleet.ConditionReady)).To(BeTrue(), "conditions: %v", c.Status.Conditions)
			}, 60*time.Second, 200*time.Millisecond)
			boot := &corev1.Secret{}
			err := j.Local.Get(s.ctx, types.NamespacedName{Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentBootstrapSecretName}, boot)
			Expect(client.IgnoreNotFound(err)).To(Succeed())
			Expect(err).To(HaveOccurred(), "%s: the token is forgotten once registered", j.Downstream.Name)
		}
		msg := fmt.Sprintf("both agents registered and deployed at the rebuilt manager %s after the first bootstrap was placed", time.Since(moved).Round(time.Millisecond))
		AddReportEntry("move", msg)
		fmt.Println(msg)
	})

	It("kept every release: nothing deployed was deleted or installed again", func() {
		s.unchanged()
	})

	It("delivers a new commit through the new manager", func() {
		s.commit()
		for _, j := range s.joined {
			e2e.WaitFor(fmt.Sprintf("round %d deployed to %s", s.round, j.Downstream.Name), s.converged(s.rebuilt.admin, j), 90*time.Second, 200*time.Millisecond)
		}
		s.unchanged()
	})
}

// newURLSteps: the agents follow the new manager to a URL of its own.
func newURLSteps(s *moveState) {
	It("follows the manager to a new URL of its own, before the old one goes away", func() {
		var err error
		s.proxyC, err = framework.NewProxy(s.rebuilt.cp.Config.Host)
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(func() { _ = s.proxyC.Close() })

		By("restarting the manager with --api-server-url C while B still works")
		changed := time.Now()
		s.rebuilt.process.Stop()
		s.rebuiltProcessOld = s.rebuilt.process
		s.rebuilt.process = startManager(s.in, s.rebuilt.cp, "manager-b-at-c", s.proxyC.URL)
		tokens := map[string]string{}
		clusters := map[string]types.UID{}
		for _, j := range s.joined {
			tokens[j.Downstream.Name], clusters[j.Downstream.Name] = j.Cred.Token, j.Cluster.UID
		}
		for _, j := range s.joined {
			e2e.WaitFor("the manager to publish its new address to "+j.Cred.ClusterNamespace, func(g Gomega) {
				cm := &corev1.ConfigMap{}
				g.Expect(s.rebuilt.admin.Get(s.ctx, types.NamespacedName{Namespace: j.Cred.ClusterNamespace, Name: internalregistration.AddressConfigMap}, cm)).To(Succeed())
				g.Expect(cm.Data).To(HaveKeyWithValue(internalregistration.AddressURLKey, s.proxyC.URL))
			}, 60*time.Second, 200*time.Millisecond)
			s.registeredAt(j, s.rebuilt, s.proxyC.URL)
			Expect(j.Cred.Token).To(Equal(tokens[j.Downstream.Name]), "%s: the same credential, at the new address: no new registration", j.Downstream.Name)
			Expect(j.Cluster.UID).To(Equal(clusters[j.Downstream.Name]), "%s: the same Cluster", j.Downstream.Name)
		}
		msg := fmt.Sprintf("both agents follow the manager's new URL %s after its restart", time.Since(changed).Round(time.Millisecond))
		AddReportEntry("url change", msg)
		fmt.Println(msg)

		By("closing URL B: the agents carry on at C")
		Expect(s.rebuilt.proxy.Close()).To(Succeed())
		closed := time.Now()
		s.commit()
		for _, j := range s.joined {
			s.checksIn(j, s.rebuilt, closed)
			e2e.WaitFor(fmt.Sprintf("round %d deployed to %s", s.round, j.Downstream.Name), s.converged(s.rebuilt.admin, j), 90*time.Second, 200*time.Millisecond)
		}
		s.unchanged()
	})
}

// commit pushes the next round of the app's ConfigMap.
func (s *moveState) commit() {
	GinkgoHelper()
	s.round++
	_, err := s.repo.Commit(fmt.Sprintf("round %d", s.round), map[string]string{
		"app/cm.yaml": fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {round: \"%d\"}\n", s.round),
	})
	Expect(err).NotTo(HaveOccurred())
}

// gitRepo creates, through admin, the GitRepo that deploys the app to the
// clusters that move.
func (s *moveState) gitRepo(admin client.Client) {
	GinkgoHelper()
	Expect(admin.Create(s.ctx, &fleet.GitRepo{
		ObjectMeta: metav1.ObjectMeta{Name: repoName, Namespace: fleet.DefaultWorkspace},
		Spec: fleet.GitRepoSpec{
			Repo: s.gitServer.RepoURL(repoName), Branch: "main", Paths: []string{"app"},
			PollingInterval: &metav1.Duration{Duration: time.Second},
			Targets: []fleet.GitTarget{{Name: "movers", ClusterSelector: &metav1.LabelSelector{
				MatchLabels: map[string]string{"move": "yes"}}}},
		},
	})).To(Succeed())
}

// converged checks that the cluster's agent applied the current round
// as the manager admin sees it, and that it is there downstream.
func (s *moveState) converged(admin client.Client, j *e2e.JoinedCluster) func(Gomega) {
	return func(g Gomega) {
		list := &fleet.BundleDeploymentList{}
		g.Expect(admin.List(s.ctx, list, client.InNamespace(j.Cred.ClusterNamespace), client.MatchingLabels{fleet.BundleNameLabel: bundle})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1), "the BundleDeployment of %s", j.Cred.ClusterNamespace)
		bd := list.Items[0]
		g.Expect(bd.Spec.DeploymentID).NotTo(BeEmpty())
		g.Expect(bd.Status.AppliedDeploymentID).To(Equal(bd.Spec.DeploymentID), "%s applied", bd.Namespace)
		g.Expect(bd.Status.Ready).To(BeTrue(), "%s ready", bd.Namespace)
		cm := &corev1.ConfigMap{}
		g.Expect(j.Local.Get(s.ctx, types.NamespacedName{Namespace: releaseNS, Name: "app"}, cm)).To(Succeed())
		g.Expect(cm.Data).To(HaveKeyWithValue("round", fmt.Sprint(s.round)))
	}
}

// registeredAt waits until the cluster's agent has stored a credential
// for the manager at url, then reads it and its Cluster there.
func (s *moveState) registeredAt(j *e2e.JoinedCluster, m *manager, url string) {
	GinkgoHelper()
	j.Admin = m.admin
	e2e.WaitFor(fmt.Sprintf("the agent of %s to store a credential for %s", j.Downstream.Name, url), func(g Gomega) {
		cred, err := upstream.LoadStored(s.ctx, j.Local, fleet.DefaultSystemNamespace)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cred).NotTo(BeNil())
		g.Expect(cred.APIServerURL).To(Equal(url), "agent log:\n%s", j.Agent.Tail(3000))
	}, 90*time.Second, 200*time.Millisecond)
	j.WaitRegistered(s.ctx, 10*time.Second)
}

// checksIn waits for the cluster's agent to check in at m after t.
func (s *moveState) checksIn(j *e2e.JoinedCluster, m *manager, t time.Time) {
	GinkgoHelper()
	e2e.WaitFor(fmt.Sprintf("the agent of %s to check in at %s", j.Downstream.Name, m.cp.Name), func(g Gomega) {
		c := &fleet.Cluster{}
		g.Expect(m.admin.Get(s.ctx, client.ObjectKeyFromObject(j.Cluster), c)).To(Succeed())
		// A check-in renews the agent's Lease; lastSeen follows it only
		// when something shown changes.
		last, err := checkin.LastOf(s.ctx, m.admin, c)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(last).To(BeTemporally(">", t))
	}, 30*time.Second, 200*time.Millisecond)
}

// unchanged checks that nothing deployed downstream was deleted or
// installed again since the first deploy: the ConfigMap and every Helm
// release record are the same objects, and no deletion was seen.
func (s *moveState) unchanged() {
	GinkgoHelper()
	for i, j := range s.joined {
		cm := &corev1.ConfigMap{}
		Expect(j.Local.Get(s.ctx, types.NamespacedName{Namespace: releaseNS, Name: "app"}, cm)).To(Succeed())
		Expect(cm.UID).To(Equal(s.configMapsBefore[i].UID), "%s: the same ConfigMap", j.Downstream.Name)
		now := releases(s.ctx, j.Local)
		for name, uid := range s.releasesBefore[i] {
			Expect(now).To(HaveKeyWithValue(name, uid), "%s: Helm release record %s kept", j.Downstream.Name, name)
		}
		Expect(s.deletions[i].Seen()).To(BeEmpty(), "%s: nothing deployed was deleted", j.Downstream.Name)
		AddReportEntry(j.Downstream.Name, fmt.Sprintf("ConfigMap resourceVersion %s -> %s; Helm release records %d -> %d",
			s.configMapsBefore[i].ResourceVersion, cm.ResourceVersion, len(s.releasesBefore[i]), len(now)))
	}
}
