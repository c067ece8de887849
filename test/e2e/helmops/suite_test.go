package helmops_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/e2e/helmops"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

var suiteInput = e2e.SuiteInput{
	Name:              "helmops",
	Upstream:          &controlplane.Options{},
	Downstreams:       2,
	DownstreamOptions: controlplane.Options{NoCRDs: true},
	Binaries:          true,
	Manager:           &controllers.Options{ContentGrace: 5 * time.Second, ClusterOfflineAfter: 15 * time.Second},
	DevLogs:           true,
}

func TestHelmOps(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	var s *e2e.Suite
	BeforeSuite(func() { s = e2e.SetUpSuite(ctx, suiteInput) })
	input := func() helmops.SpecInput {
		return helmops.SpecInput{Upstream: s.Upstream, Downstreams: s.Downstreams, Admin: s.Admin, LogDir: s.LogDir}
	}
	Describe("HelmOps whose agents download the chart", Ordered, func() { helmops.HelmOpsSpec(ctx, input) })
	RunSpecs(t, "HelmOps")
}
