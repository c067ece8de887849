package dashboard_test

import (
	"context"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/localcluster"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/e2e/dashboard"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// dashboardAddr is the in-process manager's dashboard address.
var dashboardAddr = mustFreeAddr()

func mustFreeAddr() string {
	a, err := localcluster.FreeAddr()
	if err != nil {
		panic(err)
	}
	return a
}

// suiteInput: a manager control plane with the manager's controllers (and
// its dashboard) in this process, two bare downstream control planes with
// real agents, and the binaries.
var suiteInput = e2e.SuiteInput{
	Name:              "dashboard",
	Upstream:          &controlplane.Options{},
	Downstreams:       2,
	DownstreamOptions: controlplane.Options{NoCRDs: true},
	Binaries:          true,
	Manager:           &controllers.Options{ContentGrace: 5 * time.Second, DashboardAddr: dashboardAddr, DisableLocalCluster: true},
}

// screenshot is docs/images/dashboard.png, written when
// FLEET_UPDATE_SCREENSHOT is set (else a file of the test's temp dir).
func screenshot(t *testing.T) string {
	t.Helper()
	if os.Getenv("FLEET_UPDATE_SCREENSHOT") == "" {
		return filepath.Join(t.TempDir(), "dashboard.png")
	}
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("cannot find the source file of the test")
	}
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "docs", "images", "dashboard.png")
}

func TestDashboard(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	var s *e2e.Suite
	shot := screenshot(t)
	BeforeSuite(func() { s = e2e.SetUpSuite(ctx, suiteInput) })
	Describe("The web dashboard in a browser", Ordered, func() {
		dashboard.DashboardSpec(ctx, func() dashboard.SpecInput {
			return dashboard.SpecInput{Upstream: s.Upstream, Downstreams: s.Downstreams, Admin: s.Admin, LogDir: s.LogDir,
				ManagerURL: "http://" + dashboardAddr, Screenshot: shot}
		})
	})
	RunSpecs(t, "Dashboard")
}
