package notification_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/e2e/notification"
	"github.com/gitfleet/fleet/test/framework"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// suiteInput: a manager control plane, one bare downstream control plane
// for a real agent, and the binaries. The manager's controllers run in this
// process (framework.StartManager: the rights `fleet install controller`
// gives, the outbound policy widened to loopback, where the receivers
// listen), started here so that a spec can restart them.
var suiteInput = e2e.SuiteInput{
	Name:              "notification",
	Upstream:          &controlplane.Options{},
	Downstreams:       1,
	DownstreamOptions: controlplane.Options{NoCRDs: true},
	Binaries:          true,
}

var managerOptions = controllers.Options{ContentGrace: 5 * time.Second, DisableLocalCluster: true}

func TestNotification(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	var (
		s           *e2e.Suite
		stopManager func()
	)
	startManager := func() {
		GinkgoHelper()
		o := managerOptions
		o.APIServerURL, o.APIServerCA = s.Upstream.Config.Host, s.Upstream.Config.CAData
		var err error
		stopManager, err = framework.StartManager(ctx, rest.CopyConfig(s.Upstream.Config), o)
		Expect(err).NotTo(HaveOccurred())
	}
	BeforeSuite(func() {
		s = e2e.SetUpSuite(ctx, suiteInput)
		startManager()
		DeferCleanup(func() { stopManager() })
	})
	Describe("Notifications of a GitRepo's rollouts, to every kind of destination", Ordered, func() {
		notification.NotificationSpec(ctx, func() notification.SpecInput {
			return notification.SpecInput{Upstream: s.Upstream, Downstreams: s.Downstreams, Admin: s.Admin, LogDir: s.LogDir,
				RestartManager: func() { stopManager(); startManager() }}
		})
	})
	RunSpecs(t, "Notification")
}
