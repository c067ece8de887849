// Package security_test attacks a running fleet from the footholds an
// attacker may hold, each with that foothold's own credentials, never the
// admin's: (a) a registration token, (b) one agent's credential, (c) control
// of one downstream cluster, (d) HTTP access to the webhook port, (e) a
// tenant who may write GitRepos, Clusters and Secrets in one namespace only,
// (f) control of a git repository a GitRepo points at.
//
// Every spec performs one attack against a real manager (in process, with
// exactly the rights `fleet install controller` gives it) and real agents,
// asserts that it is refused with a clear reason, and that nothing of the
// victim changed. One file per hole: <area>_test.go.
package security_test

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/egress"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

func TestSecurity(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Security")
}

// Env is what every attack spec runs against.
type Env struct {
	Ctx context.Context
	// Upstream runs the manager; Admin is its admin client, for setting up
	// victims and checking that they did not change — never for attacking.
	Upstream *controlplane.ControlPlane
	Admin    client.Client
	// Downstreams are two workload clusters: [0] the attacker's, [1] the
	// victim's.
	Downstreams []*controlplane.ControlPlane
	// Options are the manager's options in this suite.
	Options controllers.Options
	// ManagerCache is the in-process manager's cache: what it holds is
	// what the manager keeps in memory.
	ManagerCache cache.Cache
	// WebhookURL is the manager's git push webhook endpoint.
	WebhookURL string
	// Git serves the repositories under GitRoot over HTTP on loopback.
	Git     *gittest.Server
	GitURL  string
	GitRoot string
	// LogDir holds the logs of agents started by specs.
	LogDir string
}

// env is built once in BeforeSuite; specs read it, never write it.
var env *Env

// suiteInput is what the attacks run against: the manager's control plane,
// whose token controller fills service-account-token Secrets so that every
// path to a token is live (manager_credential_test.go; nothing else of
// kube-controller-manager runs, to spare the CPU), two workload clusters,
// and the binaries. The manager runs in this process; its options are set in
// BeforeSuite.
var suiteInput = e2e.SuiteInput{
	Name: "security",
	Upstream: &controlplane.Options{Name: "sec-0",
		Workloads: &controlplane.Workloads{Controllers: controlplane.TokenControllers}},
	Downstreams:       2,
	DownstreamOptions: controlplane.Options{Name: "sec-down"},
	Binaries:          true,
}

var _ = BeforeSuite(func() {
	e := &Env{Ctx: context.Background()}
	var err error
	e.GitRoot, err = os.MkdirTemp("", "fleet-e2e-security-git-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, e.GitRoot)

	webhookLn, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	webhookAddr := webhookLn.Addr().String()
	Expect(webhookLn.Close()).To(Succeed())
	e.WebhookURL = "http://" + webhookAddr + "/"

	e.Options = controllers.Options{
		WebhookAddr: webhookAddr,
		GitCacheDir: GinkgoT().TempDir(),
		// Agents renew their credential within the suite's time
		// (rotation_test.go): the manager issues the next token every 5s.
		CredentialLifetime: time.Hour, CredentialRenewAfter: 5 * time.Second,
		// Hole 11: GitRepos without webhookSecret need this one.
		WebhookSecret: []byte(managerWebhookSecret),
		// Loopback is allowed (StartManager), since the suite's git server
		// listens there, but one loopback address stands for an internal
		// service (egress_test.go).
		Egress: egress.Policy{Deny: []netip.Prefix{netip.MustParsePrefix(deniedAddr + "/32")}},
	}
	in := suiteInput
	in.Manager = &e.Options
	s := e2e.SetUpSuite(e.Ctx, in)
	e.Upstream, e.Downstreams, e.Admin, e.LogDir, e.ManagerCache = s.Upstream, s.Downstreams, s.Admin, s.LogDir, s.ManagerCache
	// What the manager runs with, its API server's address filled in.
	e.Options.APIServerURL, e.Options.APIServerCA = s.Upstream.Config.Host, s.Upstream.Config.CAData

	e.Git = gittest.NewServer(e.GitRoot)
	gitLn, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	gitSrv := &http.Server{Handler: e.Git, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = gitSrv.Serve(gitLn) }()
	e.GitURL = "http://" + gitLn.Addr().String()
	DeferCleanup(gitSrv.Close)
	env = e
})
