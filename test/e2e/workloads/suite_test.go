package workloads_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/devenv"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/e2e/workloads"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// suiteInput is what the suite runs against: a manager control plane with
// the manager's controllers in this process, two downstream control planes
// that run workloads on two simulated nodes each, and the binaries.
var suiteInput = e2e.SuiteInput{
	Name:        "workloads",
	Upstream:    &controlplane.Options{Name: "workloads-up"},
	Downstreams: 2,
	DownstreamOptions: controlplane.Options{Name: "workloads-down",
		NoCRDs: true, Workloads: &controlplane.Workloads{Nodes: 2}, StartTimeout: 3 * time.Minute},
	Binaries: true,
	Manager:  &controllers.Options{ContentGrace: 5 * time.Second},
	DevLogs:  true,
}

// reportUsage prints what the workload processes used over the suite: the
// specs' rollouts, Jobs and pod replacements are their busiest time.
func reportUsage(s *e2e.Suite) {
	var procs []devenv.WorkloadProcess
	for _, cp := range s.Downstreams {
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

func TestWorkloads(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	var s *e2e.Suite
	BeforeSuite(func() {
		s = e2e.SetUpSuite(ctx, suiteInput)
		for _, cp := range s.Downstreams {
			for _, p := range cp.WorkloadProcesses() {
				GinkgoWriter.Printf("%s of %s logs to %s\n", p.Name, cp.Name, p.Log)
			}
		}
		// Runs before the suite's own cleanup stops the control planes.
		DeferCleanup(reportUsage, s)
	})
	Describe("Workloads run by Kubernetes' controllers", Ordered, func() {
		workloads.WorkloadsSpec(ctx, func() workloads.SpecInput {
			return workloads.SpecInput{Upstream: s.Upstream, Downstreams: s.Downstreams, Admin: s.Admin, LogDir: s.LogDir}
		})
	})
	RunSpecs(t, "Workloads")
}
