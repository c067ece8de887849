// Package reliability_test breaks the manager on purpose: two replicas with
// leader election where the leader is killed or stopped, and a manager killed
// in the middle of a fan-out. Everything runs against a real API server with
// the real fleet-manager binary.
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
	"github.com/gitfleet/fleet/test/framework"
)

func TestReliability(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Reliability")
}

var (
	ctx    = context.Background()
	cp     *controlplane.ControlPlane
	admin  client.Client
	logDir string
	// managers are stopped after the suite.
	managers []*framework.Process
)

var _ = BeforeSuite(func() {
	built := make(chan error, 1)
	go func() { _, err := framework.Binaries(); built <- err }()
	var err error
	cp, err = controlplane.Start(controlplane.Options{Name: "reliability"})
	Expect(err).NotTo(HaveOccurred())
	Expect(<-built).To(Succeed())
	admin, err = cp.Client(controllers.Scheme())
	Expect(err).NotTo(HaveOccurred())
	logDir, err = os.MkdirTemp("", "fleet-reliability-")
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Println("Manager logs in", logDir)
})

var _ = AfterSuite(func() {
	for _, m := range managers {
		m.Stop()
	}
	_ = cp.Stop()
	framework.RemoveBinaries()
})
