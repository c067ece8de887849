package reliability_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/e2e/reliability"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// suiteInput is what the suite runs against: one control plane and the
// binaries; the specs run the manager as processes of their own.
var suiteInput = e2e.SuiteInput{
	Name:     "reliability",
	Upstream: &controlplane.Options{Name: "reliability"},
	Binaries: true,
}

func TestReliability(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	var s *e2e.Suite
	BeforeSuite(func() { s = e2e.SetUpSuite(ctx, suiteInput) })
	input := func() reliability.SpecInput {
		return reliability.SpecInput{ControlPlane: s.Upstream, Admin: s.Admin, LogDir: s.LogDir}
	}
	Describe("Leader election", Ordered, func() { reliability.LeaderElectionSpec(ctx, input) })
	Describe("Manager killed during a fan-out", func() { reliability.FanOutKillSpec(ctx, input) })
	Describe("Outages of the manager's API server and etcd", Ordered, func() { reliability.OutageSpec(ctx, input) })
	RunSpecs(t, "Reliability")
}
