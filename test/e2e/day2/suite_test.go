package day2_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/e2e/day2"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// suiteInput is what the suite runs against: a manager control plane with
// the manager's controllers in this process, two bare downstream control
// planes joined by real agents, and the binaries.
var suiteInput = e2e.SuiteInput{
	Name: "day2",
	// Cluster API's Cluster kind is served, so the manager enrolls Cluster
	// API clusters.
	Upstream:          &controlplane.Options{Name: "day2-up", CAPI: true},
	Downstreams:       2,
	DownstreamOptions: controlplane.Options{Name: "day2-down", NoCRDs: true},
	Binaries:          true,
	Manager: &controllers.Options{
		ContentGrace: 5 * time.Second,
		// agents check in every 5s here: three missed check-ins
		ClusterOfflineAfter: 15 * time.Second,
	},
	DevLogs: true,
}

func TestDay2(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	var s *e2e.Suite
	BeforeSuite(func() { s = e2e.SetUpSuite(ctx, suiteInput) })
	input := func() day2.SpecInput {
		return day2.SpecInput{Upstream: s.Upstream, Downstreams: s.Downstreams, Admin: s.Admin, LogDir: s.LogDir}
	}
	Describe("Day-2 verbs on a live fleet", Ordered, func() { day2.Day2Spec(ctx, input) })
	RunSpecs(t, "Day2")
}
