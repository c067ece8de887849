package agent_test

import (
	"context"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/e2e/agent"
	"github.com/gitfleet/fleet/test/framework"
)

// suite is what BeforeSuite sets up: a manager control plane with the
// manager's controllers in this process, two bare downstream control planes,
// and the binaries.
type suite struct {
	upstream    *controlplane.ControlPlane
	downstreams []*controlplane.ControlPlane
	admin       client.Client // manager cluster, admin
	logDir      string
	stopManager func()
}

func (s *suite) setUp(ctx context.Context) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	s.logDir, err = os.MkdirTemp("", "fleet-e2e-agent-")
	Expect(err).NotTo(HaveOccurred())

	// Build the binaries while the control planes start.
	built := make(chan error, 1)
	go func() { _, err := framework.Binaries(); built <- err }()
	up := make(chan error, 1)
	go func() {
		var err error
		s.upstream, err = controlplane.Start(controlplane.Options{Name: "agent-up"})
		up <- err
	}()
	s.downstreams, err = controlplane.StartN(2, "agent-down", controlplane.Options{NoCRDs: true})
	Expect(err).NotTo(HaveOccurred())
	Expect(<-up).To(Succeed())
	Expect(<-built).To(Succeed())

	s.admin, err = s.upstream.Client(controllers.Scheme())
	Expect(err).NotTo(HaveOccurred())
	s.stopManager, err = framework.StartManager(ctx, s.upstream.Config, controllers.Options{
		APIServerURL: s.upstream.Config.Host,
		APIServerCA:  s.upstream.Config.CAData,
		ContentGrace: 5 * time.Second,
		// agents check in every 5s here: three missed check-ins
		ClusterOfflineAfter: 15 * time.Second,
	})
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("Logs of agents are in %s\n", s.logDir)
}

func (s *suite) tearDown() {
	if s.stopManager != nil {
		s.stopManager()
	}
	for _, cp := range append([]*controlplane.ControlPlane{s.upstream}, s.downstreams...) {
		_ = cp.Stop()
	}
	framework.RemoveBinaries()
}

func (s *suite) input() agent.SpecInput {
	return agent.SpecInput{Upstream: s.upstream, Downstreams: s.downstreams, Admin: s.admin, LogDir: s.logDir}
}

func TestAgent(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	s := &suite{}
	BeforeSuite(func() { s.setUp(ctx) })
	AfterSuite(s.tearDown)
	Describe("The agent", Ordered, func() { agent.AgentSpec(ctx, s.input) })
	Describe("The manager's own cluster", Ordered, func() { agent.LocalClusterSpec(ctx, s.input) })
	Describe("A repository laid out Fleet's way", Ordered, func() { agent.FleetRepoSpec(ctx, s.input) })
	Describe("Un-enrolling a token-registered cluster", Ordered, func() { agent.UnenrollSpec(ctx, s.input) })
	RunSpecs(t, "Agent")
}
