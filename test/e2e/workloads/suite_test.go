package workloads_test

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
	"github.com/gitfleet/fleet/internal/devenv"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/e2e/workloads"
	"github.com/gitfleet/fleet/test/framework"
)

// suite is what BeforeSuite sets up: a manager control plane with the
// manager's controllers in this process, two downstream control planes that
// run workloads on two simulated nodes each, and the binaries.
type suite struct {
	upstream    *controlplane.ControlPlane
	downstreams []*controlplane.ControlPlane
	admin       client.Client
	logDir      string
	stopManager func()
}

func (s *suite) setUp(ctx context.Context) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	s.logDir, err = os.MkdirTemp("", "fleet-e2e-workloads-")
	Expect(err).NotTo(HaveOccurred())

	built := make(chan error, 1)
	go func() { _, err := framework.Binaries(); built <- err }()
	up := make(chan error, 1)
	go func() {
		var err error
		s.upstream, err = controlplane.Start(controlplane.Options{Name: "workloads-up"})
		up <- err
	}()
	s.downstreams, err = controlplane.StartN(2, "workloads-down", controlplane.Options{
		NoCRDs: true, Workloads: &controlplane.Workloads{Nodes: 2}, StartTimeout: 3 * time.Minute})
	Expect(err).NotTo(HaveOccurred())
	Expect(<-up).To(Succeed())
	Expect(<-built).To(Succeed())
	for _, cp := range s.downstreams {
		for _, p := range cp.WorkloadProcesses() {
			GinkgoWriter.Printf("%s of %s logs to %s\n", p.Name, cp.Name, p.Log)
		}
	}

	s.admin, err = s.upstream.Client(controllers.Scheme())
	Expect(err).NotTo(HaveOccurred())
	s.stopManager, err = framework.StartManager(ctx, s.upstream.Config, controllers.Options{
		APIServerURL: s.upstream.Config.Host,
		APIServerCA:  s.upstream.Config.CAData,
		ContentGrace: 5 * time.Second,
	})
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("Logs of agents are in %s\n", s.logDir)
}

func (s *suite) tearDown() {
	s.reportUsage()
	if s.stopManager != nil {
		s.stopManager()
	}
	for _, cp := range append([]*controlplane.ControlPlane{s.upstream}, s.downstreams...) {
		_ = cp.Stop()
	}
	framework.RemoveBinaries()
}

// reportUsage prints what the workload processes used over the suite: the
// specs' rollouts, Jobs and pod replacements are their busiest time.
func (s *suite) reportUsage() {
	var procs []devenv.WorkloadProcess
	for _, cp := range s.downstreams {
		for _, p := range cp.WorkloadProcesses() {
			procs = append(procs, devenv.WorkloadProcess{Cluster: cp.Name, Name: p.Name, PID: p.PID(), Log: p.Log})
		}
	}
	const window = 2 * time.Second
	usage, err := devenv.MeasureWorkloads(context.Background(), procs, window)
	if err != nil {
		GinkgoWriter.Printf("measuring the workload processes: %v\n", err)
		return
	}
	GinkgoWriter.Printf("What ran the workloads over the suite:\n")
	_ = devenv.PrintUsage(GinkgoWriter, usage, window)
}

func (s *suite) input() workloads.SpecInput {
	return workloads.SpecInput{Upstream: s.upstream, Downstreams: s.downstreams, Admin: s.admin, LogDir: s.logDir}
}

func TestWorkloads(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	s := &suite{}
	BeforeSuite(func() { s.setUp(ctx) })
	AfterSuite(s.tearDown)
	Describe("Workloads run by Kubernetes' controllers", Ordered, func() { workloads.WorkloadsSpec(ctx, s.input) })
	RunSpecs(t, "Workloads")
}
