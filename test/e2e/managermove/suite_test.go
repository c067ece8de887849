package managermove_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/e2e/managermove"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// suiteInput is what the suite runs against: two manager control planes (the
// specs run the managers as processes), two downstream ones, and the
// binaries.
var suiteInput = e2e.SuiteInput{
	Name:              "managermove",
	Upstream:          &controlplane.Options{Name: "manager-0"},
	Extra:             []controlplane.Options{{Name: "manager-1"}},
	Downstreams:       2,
	DownstreamOptions: controlplane.Options{Name: "workload", NoCRDs: true},
	Binaries:          true,
}

func TestManagerMove(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	var s *e2e.Suite
	BeforeSuite(func() { s = e2e.SetUpSuite(ctx, suiteInput) })
	Describe("Agents following their manager", Ordered, func() {
		managermove.MoveSpec(ctx, func() managermove.SpecInput {
			return managermove.SpecInput{Managers: append([]*controlplane.ControlPlane{s.Upstream}, s.Extra...),
				Workloads: s.Downstreams, LogDir: s.LogDir}
		})
	})
	RunSpecs(t, "Agents following their manager")
}
