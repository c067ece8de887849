package reliability

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework"
	"github.com/gitfleet/fleet/test/framework/e2e"
	"github.com/gitfleet/fleet/test/simagent"
)

// agents is how many simulated agents OutageSpec runs.
const agents = 100

// outageRun is what the specs of OutageSpec share.
type outageRun struct {
	ctx    context.Context
	input  SpecInput
	admin  client.Client
	cp     *controlplane.ControlPlane
	repo   *gittest.Repo
	mgr    *framework.Process
	sims   []*simagent.Agent
	cancel context.CancelFunc
	round  int
}

// OutageSpec stops the manager's API server, then etcd, while a hundred
// agents work and git keeps changing: every agent resumes and every change
// made meanwhile arrives, without restarting anything but the component that
// failed. Call it in an Ordered container.
func OutageSpec(ctx context.Context, inputGetter func() SpecInput) {
	s := &outageRun{ctx: ctx}
	BeforeAll(func() {
		s.input = inputGetter()
		s.input.validate("OutageSpec")
		s.admin, s.cp = s.input.Admin, s.input.ControlPlane
		root := GinkgoT().TempDir()
		var err error
		s.repo, err = gittest.NewRepo(root+"/outage", "main")
		Expect(err).NotTo(HaveOccurred())
		first := s.commit()
		server := gittest.NewServer(root)
		DeferCleanup(server.Close)

		// One manager without leader election: it has to ride the outage out
		// in process (with leader election it would exit and be restarted).
		// Ready means its cache synced, after it made the namespaces the
		// token below is created in.
		s.mgr, err = framework.StartManagerProcess(s.input.LogDir, "outage-manager", "--kubeconfig", s.cp.Kubeconfig,
			"--api-server-url", s.cp.Config.Host, "--webhook-bind-address", "",
			// The agents run as processes; nothing runs their Deployments' pods.
			"--agent-bundles=false",
			// The git server listens on loopback.
			framework.EgressAllowLoopbackArgs[0], framework.EgressAllowLoopbackArgs[1])
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(s.mgr.Stop)

		tokenCtx, cancelToken := context.WithTimeout(s.ctx, time.Minute)
		defer cancelToken()
		_, boot, err := agentinstall.CreateToken(tokenCtx, s.admin, agentinstall.TokenOptions{Namespace: fleet.DefaultWorkspace, Name: "outage"})
		Expect(err).NotTo(HaveOccurred())
		boot.APIServerURL, boot.APIServerCA = s.cp.Config.Host, string(s.cp.Config.CAData)
		host, err := simagent.HostClient(s.cp.Config)
		Expect(err).NotTo(HaveOccurred())
		s.sims, _, err = simagent.RegisterAll(s.ctx, host, agents, boot, func(int) map[string]string { return map[string]string{"outage": "true"} })
		Expect(err).NotTo(HaveOccurred())
		var runCtx context.Context
		runCtx, s.cancel = context.WithCancel(s.ctx)
		DeferCleanup(func() { s.cancel() })
		for _, a := range s.sims {
			go a.Run(runCtx)
			go func() { // check in every 2 seconds, as long as the spec runs
				for runCtx.Err() == nil {
					_ = a.Beat(runCtx)
					select {
					case <-runCtx.Done():
					case <-time.After(2 * time.Second):
					}
				}
			}()
		}

		Expect(s.admin.Create(s.ctx, &fleet.GitRepo{
			ObjectMeta: metav1.ObjectMeta{Name: "outage", Namespace: fleet.DefaultWorkspace},
			Spec: fleet.GitRepoSpec{
				Repo: server.RepoURL("outage"), Branch: "main", Paths: []string{"app"},
				PollingInterval: &metav1.Duration{Duration: time.Second},
				Targets: []fleet.GitTarget{{Name: "outage", ClusterSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{"outage": "true"}}}},
			},
		})).To(Succeed())
		Eventually(s.converged(first), 2*time.Minute, time.Second).Should(Succeed(), "every agent applies the first commit; manager log:\n%s", s.mgr.Output())
	})

	It("resumes every agent after the API server was down for a minute, with the change pushed meanwhile", func() {
		var hash string
		stopped, back := s.outage("the API server", s.cp.StopAPIServer, s.cp.StartAPIServer, time.Minute, func() {
			hash = s.commit() // pushed while the API server is down
		})
		GinkgoWriter.Printf("The API server was down for %s\n", back.Sub(stopped).Round(time.Second))

		Eventually(s.converged(hash), 3*time.Minute, time.Second).Should(Succeed(), "manager log:\n%s", s.mgr.Tail(8000))
		Eventually(s.checkedInSince(back), time.Minute, time.Second).Should(Succeed(), "every agent checks in again")
		GinkgoWriter.Printf("Every agent applied the commit pushed during the outage %s after the API server was back\n",
			time.Since(back).Round(time.Second))
		Expect(s.mgr.Exited()).To(BeFalse(), "the manager rode the outage out")
	})

	It("resumes after etcd was restarted, with the change pushed meanwhile", func() {
		var hash string
		stopped, back := s.outage("etcd", s.cp.StopEtcd, s.cp.StartEtcd, 15*time.Second, func() {
			hash = s.commit() // pushed while etcd is down
		})
		GinkgoWriter.Printf("etcd was down for %s\n", back.Sub(stopped).Round(time.Second))

		Eventually(s.converged(hash), 3*time.Minute, time.Second).Should(Succeed(), "manager log:\n%s", s.mgr.Tail(8000))
		Eventually(s.checkedInSince(back), time.Minute, time.Second).Should(Succeed(), "every agent checks in again")
		GinkgoWriter.Printf("Every agent applied the commit pushed while etcd was down %s after it was back\n",
			time.Since(back).Round(time.Second))
		Expect(s.mgr.Exited()).To(BeFalse())
		Expect(s.admin.Get(s.ctx, client.ObjectKey{Name: fleet.DefaultWorkspace}, &corev1.Namespace{})).To(Succeed())
	})
}

// commit changes the one ConfigMap of the repository.
func (s *outageRun) commit() string {
	s.round++
	hash, err := s.repo.Commit(fmt.Sprintf("round %d", s.round), map[string]string{
		"app/cm.yaml": fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {round: \"%d\"}\n", s.round),
	})
	Expect(err).NotTo(HaveOccurred())
	return hash
}

// converged checks that the GitRepo is at commit and that every agent
// applied and reported the deployment built from it.
func (s *outageRun) converged(hash string) func(Gomega) {
	return func(g Gomega) {
		gr := &fleet.GitRepo{}
		g.Expect(s.admin.Get(s.ctx, client.ObjectKey{Namespace: fleet.DefaultWorkspace, Name: "outage"}, gr)).To(Succeed())
		g.Expect(gr.Status.Commit).To(Equal(hash))
		b := &fleet.Bundle{}
		g.Expect(s.admin.Get(s.ctx, client.ObjectKey{Namespace: fleet.DefaultWorkspace, Name: "outage-app"}, b)).To(Succeed())
		g.Expect(b.Spec.Resources).NotTo(BeEmpty())
		g.Expect(b.Spec.Resources[0].Content).To(ContainSubstring(fmt.Sprintf("round: \"%d\"", s.round)))
		list := &fleet.BundleDeploymentList{}
		g.Expect(s.admin.List(s.ctx, list, client.MatchingLabels{fleet.BundleNameLabel: "outage-app"})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(agents))
		ids := map[string]bool{}
		for _, bd := range list.Items {
			g.Expect(bd.Status.AppliedDeploymentID).To(Equal(bd.Spec.DeploymentID), "%s applied", bd.Namespace)
			g.Expect(bd.Status.Ready).To(BeTrue())
			ids[bd.Spec.DeploymentID] = true
		}
		g.Expect(ids).To(HaveLen(1), "every cluster runs the same deployment")
	}
}

// checkedInSince checks that every agent checked in after t.
func (s *outageRun) checkedInSince(t time.Time) func(Gomega) {
	return func(g Gomega) {
		list := &fleet.ClusterList{}
		g.Expect(s.admin.List(s.ctx, list, client.InNamespace(fleet.DefaultWorkspace), client.MatchingLabels{"outage": "true"})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(agents))
		for _, c := range list.Items {
			// The Lease: lastSeen is written only now and then.
			seen, err := checkin.LastOf(s.ctx, s.admin, &c)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(seen).To(BeTemporally(">", t), "%s checked in again", c.Name)
		}
	}
}

// outage stops a component with stop, calls meanwhile, checks that
// the manager keeps running in process until d has passed since the
// stop began, and starts the component again (also when the spec
// fails meanwhile). It returns when the outage began and ended.
func (s *outageRun) outage(what string, stop, start func() error, d time.Duration, meanwhile func()) (stopped, back time.Time) {
	GinkgoHelper()
	stopped = time.Now()
	Expect(stop()).To(Succeed(), "stopping %s", what)
	started := false
	defer func() {
		if !started {
			_ = start()
		}
	}()
	meanwhile()
	e2e.HoldsFor("the manager keeps running while "+what+" is down", func(g Gomega) {
		g.Expect(s.mgr.Exited()).To(BeFalse(), "the manager exited:\n%s", s.mgr.Tail(4000))
	}, d-time.Since(stopped), time.Second)
	started = true
	Expect(start()).To(Succeed(), "starting %s again", what)
	return stopped, time.Now()
}
