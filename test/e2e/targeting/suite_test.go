package targeting_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/e2e/targeting"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// suiteInput is what the suite runs against: one control plane with the
// manager's controllers in this process, serving its metrics.
var suiteInput = e2e.SuiteInput{
	Name:           "targeting",
	Upstream:       &controlplane.Options{Name: "targeting"},
	Manager:        &controllers.Options{ContentGrace: 2 * time.Second},
	ManagerMetrics: true,
}

func TestTargeting(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	var s *e2e.Suite
	BeforeSuite(func() { s = e2e.SetUpSuite(ctx, suiteInput) })
	input := func() targeting.SpecInput {
		return targeting.SpecInput{Admin: s.Admin, Kubeconfig: s.Upstream.Kubeconfig, MetricsURL: s.MetricsURL}
	}
	Describe("GitRepo to BundleDeployments", Ordered, func() { targeting.GitOpsSpec(ctx, input) })
	Describe("Targeting", Ordered, func() { targeting.TargetingSpec(ctx, input) })
	Describe("Previewing with fleet target and fleet test", Ordered, func() { targeting.PreviewSpec(ctx, input) })
	Describe("Metrics and events", Ordered, func() { targeting.MetricsSpec(ctx, input) })
	RunSpecs(t, "Targeting")
}
