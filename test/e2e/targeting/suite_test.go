// Package targeting_test checks, against a real API server with the manager's
// controllers running, that Bundles reach exactly the clusters their targets
// select, with the options customized per cluster, and that status rolls up.
package targeting_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework"
)

func TestTargeting(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Targeting")
}

var (
	ctx         = context.Background()
	cp          *controlplane.ControlPlane
	admin       client.Client
	stopManager func()
)

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	var err error
	cp, err = controlplane.Start(controlplane.Options{Name: "targeting"})
	Expect(err).NotTo(HaveOccurred())
	admin, err = cp.Client(controllers.Scheme())
	Expect(err).NotTo(HaveOccurred())
	stopManager, err = framework.StartManager(ctx, cp.Config, controllers.Options{
		APIServerURL: cp.Config.Host, ContentGrace: 2 * time.Second,
	})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	if stopManager != nil {
		stopManager()
	}
	_ = cp.Stop()
})
