package targeting_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/e2e/targeting"
	"github.com/gitfleet/fleet/test/framework"
)

// suite is what BeforeSuite sets up: one control plane with the manager's
// controllers in this process.
type suite struct {
	cp          *controlplane.ControlPlane
	admin       client.Client
	stopManager func()
	metricsURL  string
}

func (s *suite) setUp(ctx context.Context) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	var err error
	s.cp, err = controlplane.Start(controlplane.Options{Name: "targeting"})
	Expect(err).NotTo(HaveOccurred())
	s.admin, err = s.cp.Client(controllers.Scheme())
	Expect(err).NotTo(HaveOccurred())
	s.stopManager, s.metricsURL, err = framework.StartManagerServingMetrics(ctx, s.cp.Config, controllers.Options{
		APIServerURL: s.cp.Config.Host, ContentGrace: 2 * time.Second,
	})
	Expect(err).NotTo(HaveOccurred())
}

func (s *suite) tearDown() {
	if s.stopManager != nil {
		s.stopManager()
	}
	_ = s.cp.Stop()
	framework.RemoveBinaries()
}

func (s *suite) input() targeting.SpecInput {
	return targeting.SpecInput{Admin: s.admin, Kubeconfig: s.cp.Kubeconfig, MetricsURL: s.metricsURL}
}

func TestTargeting(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	s := &suite{}
	BeforeSuite(func() { s.setUp(ctx) })
	AfterSuite(s.tearDown)
	Describe("GitRepo to BundleDeployments", Ordered, func() { targeting.GitOpsSpec(ctx, s.input) })
	Describe("Targeting", Ordered, func() { targeting.TargetingSpec(ctx, s.input) })
	Describe("Previewing with fleet target and fleet test", Ordered, func() { targeting.PreviewSpec(ctx, s.input) })
	Describe("Metrics and events", Ordered, func() { targeting.MetricsSpec(ctx, s.input) })
	RunSpecs(t, "Targeting")
}
