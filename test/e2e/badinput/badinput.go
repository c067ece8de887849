package badinput

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/upstream"
	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/test/chartrepo"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// SpecInput is what BadInputSpec runs against.
type SpecInput struct {
	// Upstream is the manager's control plane, the manager running on it
	// with its webhook server at WebhookURL, polling its git repositories.
	Upstream *controlplane.ControlPlane
	// Downstream is a bare control plane that joins the manager with the
	// real agent.
	Downstream *controlplane.ControlPlane
	// Admin is an admin client of Upstream, with the manager's scheme.
	Admin client.Client
	// LogDir receives the agent's log and the CLI's work directories.
	LogDir string
	// GitRoot is the directory GitServer serves repositories from.
	GitRoot   string
	GitServer *gittest.Server
	// ChartRepo is a Helm chart repository on loopback.
	ChartRepo *chartrepo.Repo
	// WebhookURL is the manager's git push webhook endpoint, and
	// WebhookSecret its secret for GitRepos that name none of their own.
	WebhookURL    string
	WebhookSecret string
}

func (in SpecInput) validate(spec string) {
	Expect(in.Upstream).NotTo(BeNil(), "%s: SpecInput.Upstream is required", spec)
	Expect(in.Downstream).NotTo(BeNil(), "%s: SpecInput.Downstream is required", spec)
	Expect(in.Admin).NotTo(BeNil(), "%s: SpecInput.Admin is required", spec)
	Expect(in.LogDir).NotTo(BeEmpty(), "%s: SpecInput.LogDir is required", spec)
	Expect(in.GitRoot).NotTo(BeEmpty(), "%s: SpecInput.GitRoot is required", spec)
	Expect(in.GitServer).NotTo(BeNil(), "%s: SpecInput.GitServer is required", spec)
	Expect(in.ChartRepo).NotTo(BeNil(), "%s: SpecInput.ChartRepo is required", spec)
	Expect(in.WebhookURL).NotTo(BeEmpty(), "%s: SpecInput.WebhookURL is required", spec)
	Expect(in.WebhookSecret).NotTo(BeEmpty(), "%s: SpecInput.WebhookSecret is required", spec)
}

// fixture is what the surfaces share: the input, the joined agent, the
// healthy fleet's snapshot and what each surface sets up in its BeforeAll.
type fixture struct {
	ctx                       context.Context
	upstream, downstream      *controlplane.ControlPlane
	admin                     client.Client // manager cluster, admin
	local                     client.Client // downstream cluster, admin
	logDir, gitRoot           string
	gitServer                 *gittest.Server
	chartRepo                 *chartrepo.Repo
	webhookURL, webhookSecret string

	// The agent of the downstream cluster, its Cluster and its credential.
	agent        *framework.Process
	agentCluster *fleet.Cluster
	agentCred    *upstream.Credential

	// The healthy fleet's repository, and its snapshot taken before any bad
	// input.
	healthyGit *gittest.Repo
	healthy    snapshot

	// authServer serves the same repositories behind basic auth;
	// unreachableURL is a loopback URL nobody answers on.
	authServer     *gittest.Server
	unreachableURL string

	// nobodyToken is a ServiceAccount token with no rights.
	nobodyToken string

	// The registration surface's tokens: one that works, one whose TTL
	// passed, one that was deleted; and a registered victim cluster.
	validBoot, expiredBoot, revokedBoot *agentinstall.Bootstrap
	victimCred                          *upstream.Credential
	victim                              *fleet.Cluster
}

// BadInputSpec sets up a healthy fleet (a GitRepo with two bundles over two
// clusters and the agent's), feeds every surface its bad input, and checks
// after each that the system said clearly what is wrong and that the healthy
// fleet was not disturbed; the last spec checks that the manager still does
// its work. Call it in an Ordered container, with ContinueOnFailure so that
// a failing entry does not stop the others.
func BadInputSpec(ctx context.Context, inputGetter func() SpecInput) {
	f := &fixture{ctx: ctx}
	BeforeAll(func() {
		in := inputGetter()
		in.validate("BadInputSpec")
		f.upstream, f.downstream, f.admin, f.logDir = in.Upstream, in.Downstream, in.Admin, in.LogDir
		f.gitRoot, f.gitServer, f.chartRepo = in.GitRoot, in.GitServer, in.ChartRepo
		f.webhookURL, f.webhookSecret = in.WebhookURL, in.WebhookSecret
		f.startHealthy()
		f.joinAgent(in)
		f.waitHealthy()
	})
	AfterAll(func() { f.agent.Stop() })

	Context("git, fleet.yaml and bundle reading", f.gitSurface)
	Context("API validation of the custom resources", f.apiSurface)
	Context("registration and tokens", f.registrationSurface)
	Context("kubeconfig Secrets for Cluster import", f.kubeconfigSurface)
	Context("the git push webhook", f.webhookSurface)
	Context("the fleet CLI", f.cliSurface)

	It("leaves the healthy fleet as it was, and the manager still fans out a fresh bundle", func() {
		f.expectUndisturbed()
		Consistently(func(g Gomega) {
			g.Expect(f.takeSnapshot()).To(Equal(f.healthy))
		}, 2*pollingInterval, 200*time.Millisecond).Should(Succeed())

		files := map[string]string{
			"fresh/fleet.yaml": "defaultNamespace: fresh\n",
			"fresh/cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: fresh}\ndata: {a: b}\n",
		}
		_, err := f.healthyGit.Commit("a fresh bundle", files)
		Expect(err).NotTo(HaveOccurred())
		Eventually(func(g Gomega) {
			bds := f.deploymentsOf("healthy-fresh")
			g.Expect(keys(bds)).To(ConsistOf(append([]string{f.agentCluster.Name}, healthyClusters()...)))
			bd := bds[f.agentCluster.Name]
			g.Expect(summary.State(bd)).To(Equal(fleet.Ready), "%s\nagent log:\n%s", summary.Message(bd), f.agent.Tail(4000))
		}, timeout, poll).Should(Succeed())
		Expect(f.local.Get(ctx, types.NamespacedName{Namespace: "fresh", Name: "fresh"}, &corev1.ConfigMap{})).To(Succeed())
		for _, b := range healthyBundles() {
			Expect(f.deploymentsOf(b)).To(HaveLen(3), "bundle %s", b)
		}
	})
}

// joinAgent registers the downstream cluster as a person would: the token
// and config manifests printed by the CLI, applied downstream, and the agent
// started from them.
func (f *fixture) joinAgent(in SpecInput) {
	GinkgoHelper()
	j := e2e.Join(f.ctx, e2e.JoinInput{Upstream: in.Upstream, Downstream: in.Downstream, Admin: in.Admin, LogDir: in.LogDir,
		ConfigArgs: []string{"-l", "env=" + agentEnv},
		AgentArgs:  []string{"--checkin-interval", "5s", "--min-backoff", "100ms", "--max-backoff", "2s", "--resync", "30s"}}, 60*time.Second)
	f.local, f.agent, f.agentCluster, f.agentCred = j.Local, j.Agent, j.Cluster, j.Cred
	Expect(f.agentCluster.Labels).To(HaveKeyWithValue("env", agentEnv))
}
