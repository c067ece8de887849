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
	"github.com/gitfleet/fleet/test/e2e/registration"
	"github.com/gitfleet/fleet/test/framework"
)

// suite is what BeforeSuite sets up: three control planes, the manager's
// controllers in this process on the first, and the binaries.
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
	s.logDir, err = os.MkdirTemp("", "fleet-e2e-registration-")
	Expect(err).NotTo(HaveOccurred())

	// Build the binaries while the control planes start.
	built := make(chan error, 1)
	go func() { _, err := framework.Binaries(); built <- err }()
	cps, err := controlplane.StartN(3, "reg", controlplane.Options{})
	Expect(err).NotTo(HaveOccurred())
	s.upstream, s.downstreams = cps[0], cps[1:]
	Expect(<-built).To(Succeed())

	s.admin, err = s.upstream.Client(controllers.Scheme())
	Expect(err).NotTo(HaveOccurred())
	s.stopManager, err = framework.StartManager(ctx, s.upstream.Config, controllers.Options{
		APIServerURL: s.upstream.Config.Host,
		APIServerCA:  s.upstream.Config.CAData,
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

func (s *suite) input() registration.SpecInput {
	return registration.SpecInput{Upstream: s.upstream, Downstreams: s.downstreams, Admin: s.admin, LogDir: s.logDir}
}

func TestRegistration(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	s := &suite{}
	BeforeSuite(func() { s.setUp(ctx) })
	AfterSuite(s.tearDown)
	Describe("Token registration", Ordered, func() { registration.TokenRegistrationSpec(ctx, s.input) })
	RunSpecs(t, "Registration and security")
}
