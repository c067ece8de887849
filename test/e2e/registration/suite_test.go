package registration_test

import (
	"context"
	"testing"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/e2e/registration"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// suiteInput is what the suite runs against: three control planes with the
// fleet CRDs, the manager's controllers in this process on the first, and
// the binaries.
var suiteInput = e2e.SuiteInput{
	Name:              "reg",
	Upstream:          &controlplane.Options{},
	Downstreams:       2,
	DownstreamOptions: controlplane.Options{},
	Binaries:          true,
	Manager:           &controllers.Options{},
	DevLogs:           true,
}

func TestRegistration(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	var s *e2e.Suite
	BeforeSuite(func() { s = e2e.SetUpSuite(ctx, suiteInput) })
	Describe("Token registration", Ordered, func() {
		registration.TokenRegistrationSpec(ctx, func() registration.SpecInput {
			return registration.SpecInput{Upstream: s.Upstream, Downstreams: s.Downstreams, Admin: s.Admin, LogDir: s.LogDir}
		})
	})
	RunSpecs(t, "Registration and security")
}
