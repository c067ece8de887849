package reliability_test

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/e2e/reliability"
	"github.com/gitfleet/fleet/test/framework"
)

// suite is what BeforeSuite sets up for every spec: one control plane and
// the binaries.
type suite struct {
	cp     *controlplane.ControlPlane
	admin  client.Client
	logDir string
}

func (s *suite) setUp() {
	built := make(chan error, 1)
	go func() { _, err := framework.Binaries(); built <- err }()
	var err error
	s.cp, err = controlplane.Start(controlplane.Options{Name: "reliability"})
	Expect(err).NotTo(HaveOccurred())
	Expect(<-built).To(Succeed())
	s.admin, err = s.cp.Client(controllers.Scheme())
	Expect(err).NotTo(HaveOccurred())
	s.logDir, err = os.MkdirTemp("", "fleet-reliability-")
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Println("Manager logs in", s.logDir)
}

func (s *suite) tearDown() {
	_ = s.cp.Stop()
	framework.RemoveBinaries()
}

func (s *suite) input() reliability.SpecInput {
	return reliability.SpecInput{ControlPlane: s.cp, Admin: s.admin, LogDir: s.logDir}
}

func TestReliability(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	s := &suite{}
	BeforeSuite(s.setUp)
	AfterSuite(s.tearDown)
	Describe("Leader election", Ordered, func() { reliability.LeaderElectionSpec(ctx, s.input) })
	Describe("Manager killed during a fan-out", func() { reliability.FanOutKillSpec(ctx, s.input) })
	Describe("Outages of the manager's API server and etcd", Ordered, func() { reliability.OutageSpec(ctx, s.input) })
	RunSpecs(t, "Reliability")
}
