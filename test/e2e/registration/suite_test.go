// Package registration_test is the end-to-end suite of token registration and
// per-cluster security: a manager control plane, two downstream control
// planes, the real `fleet` CLI and the real `fleet-agent` binary.
package registration_test

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework"
)

func TestRegistration(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Registration and security")
}

var (
	ctx         context.Context
	upstream    *controlplane.ControlPlane
	downstreams []*controlplane.ControlPlane
	admin       client.Client // manager cluster, admin
	logDir      string
	stopManager func()
)

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx = context.Background()
	var err error
	logDir, err = os.MkdirTemp("", "fleet-e2e-registration-")
	Expect(err).NotTo(HaveOccurred())

	// Build the binaries while the control planes start.
	built := make(chan error, 1)
	go func() { _, err := framework.Binaries(); built <- err }()
	cps, err := controlplane.StartN(3, "reg", controlplane.Options{})
	Expect(err).NotTo(HaveOccurred())
	upstream, downstreams = cps[0], cps[1:]
	Expect(<-built).To(Succeed())

	admin, err = upstream.Client(controllers.Scheme())
	Expect(err).NotTo(HaveOccurred())
	stopManager, err = framework.StartManager(ctx, upstream.Config, controllers.Options{
		APIServerURL: upstream.Config.Host,
		APIServerCA:  upstream.Config.CAData,
		// Below the fifty registered at once, so that some wait.
		RegistrationMaxPending: maxPending,
	})
	Expect(err).NotTo(HaveOccurred())
	GinkgoWriter.Printf("Logs of agents are in %s\n", logDir)
})

// maxPending is the manager's bound on credentials waiting for pickup.
const maxPending = 10

var _ = AfterSuite(func() {
	if stopManager != nil {
		stopManager()
	}
	for _, cp := range append([]*controlplane.ControlPlane{upstream}, downstreams...) {
		_ = cp.Stop()
	}
	framework.RemoveBinaries()
})
