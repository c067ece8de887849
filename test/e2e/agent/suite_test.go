// Package agent_test is the end-to-end suite of the agent: a manager control
// plane with the manager's controllers in this process, two downstream
// control planes registered with the real `fleet` CLI, each running the real
// `fleet-agent` binary as a process. Bundles go in upstream; objects,
// statuses and drift are checked on both sides, also across an outage of the
// manager's API server and a crash of an agent in the middle of an install.
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
	"github.com/gitfleet/fleet/test/framework"
)

func TestAgent(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Agent")
}

var (
	ctx         context.Context
	upstream    *controlplane.ControlPlane
	downstreams []*controlplane.ControlPlane
	admin       client.Client // manager cluster, admin
	logDir      string
	stopManager func()
	// agents are every agent process started, stopped after the suite.
	agents []*framework.Process
)

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx = context.Background()
	var err error
	logDir, err = os.MkdirTemp("", "fleet-e2e-agent-")
	Expect(err).NotTo(HaveOccurred())

	// Build the binaries while the control planes start.
	built := make(chan error, 1)
	go func() { _, err := framework.Binaries(); built <- err }()
	up := make(chan error, 1)
	go func() {
		var err error
		upstream, err = controlplane.Start(controlplane.Options{Name: "agent-up"})
		up <- err
	}()
	downstreams, err = controlplane.StartN(2, "agent-down", controlplane.Options{NoCRDs: true})
	Expect(err).NotTo(HaveOccurred())
	Expect(<-up).To(Succeed())
	Expect(<-built).To(Succeed())

	admin, err = upstream.Client(controllers.Scheme())
	Expect(err).NotTo(HaveOccurred())
	stopManager, err = framework.StartManager(ctx, upstream.Config, controllers.Options{
		APIServerURL: upstream.Config.Host,
		APIServerCA:  upstream.Config.CAData,
		ContentGrace: 5 * time.Second,
		// agents check in every 5s here: three missed check-ins
		ClusterOfflineAfter: 15 * time.Second,
	})
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("Logs of agents are in %s\n", logDir)
})

var _ = AfterSuite(func() {
	for _, a := range agents {
		a.Stop()
	}
	if stopManager != nil {
		stopManager()
	}
	for _, cp := range append([]*controlplane.ControlPlane{upstream}, downstreams...) {
		_ = cp.Stop()
	}
	framework.RemoveBinaries()
})
