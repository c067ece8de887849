package agent_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/e2e/agent"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// suiteInput is what the suite runs against: a manager control plane with the
// manager's controllers in this process, two bare downstream control planes,
// and the binaries.
var suiteInput = e2e.SuiteInput{
	Name:              "agent",
	Upstream:          &controlplane.Options{},
	Downstreams:       2,
	DownstreamOptions: controlplane.Options{NoCRDs: true},
	Binaries:          true,
	Manager: &controllers.Options{
		ContentGrace: 5 * time.Second,
		// agents check in every 5s here: three missed check-ins
		ClusterOfflineAfter: 15 * time.Second,
	},
	DevLogs: true,
}

func TestAgent(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	var s *e2e.Suite
	BeforeSuite(func() { s = e2e.SetUpSuite(ctx, suiteInput) })
	input := func() agent.SpecInput {
		return agent.SpecInput{Upstream: s.Upstream, Downstreams: s.Downstreams, Admin: s.Admin, LogDir: s.LogDir}
	}
	Describe("The agent", Ordered, func() { agent.AgentSpec(ctx, input) })
	Describe("The manager's own cluster", Ordered, func() { agent.LocalClusterSpec(ctx, input) })
	Describe("A repository laid out Fleet's way", Ordered, func() { agent.FleetRepoSpec(ctx, input) })
	Describe("Un-enrolling a token-registered cluster", Ordered, func() { agent.UnenrollSpec(ctx, input) })
	Describe("A Schedule's deployment window", Ordered, func() { agent.ScheduleSpec(ctx, input) })
	Describe("Two managers sharing the work by shard", Ordered, func() { agent.ShardingSpec(ctx, input) })
	Describe("Where Fleet's suites waited 45 seconds in vain", Ordered, func() { agent.FleetCasesSpec(ctx, input) })
	Describe("Twenty GitRepos on one repository", Ordered, func() { agent.MonorepoSpec(ctx, input) })
	RunSpecs(t, "Agent")
}
