package notification_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/e2e/notification"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// suiteInput: a manager control plane with the manager's controllers in this
// process (their outbound policy widened to loopback, where the receiver
// listens), one bare downstream control plane for a real agent, and the
// binaries.
var suiteInput = e2e.SuiteInput{
	Name:              "notification",
	Upstream:          &controlplane.Options{},
	Downstreams:       1,
	DownstreamOptions: controlplane.Options{NoCRDs: true},
	Binaries:          true,
	Manager:           &controllers.Options{ContentGrace: 5 * time.Second, DisableLocalCluster: true},
}

func TestNotification(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	var s *e2e.Suite
	BeforeSuite(func() { s = e2e.SetUpSuite(ctx, suiteInput) })
	Describe("A webhook Notification of a GitRepo's rollouts", Ordered, func() {
		notification.NotificationSpec(ctx, func() notification.SpecInput {
			return notification.SpecInput{Upstream: s.Upstream, Downstreams: s.Downstreams, Admin: s.Admin, LogDir: s.LogDir}
		})
	})
	RunSpecs(t, "Notification")
}
