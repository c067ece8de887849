package e2e

import (
	"context"
	"errors"
	"os"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework"
)

// SuiteInput says what an e2e suite runs against. SetUpSuite starts it all
// at once (control planes in parallel, the binaries built meanwhile), the way
// Cluster API's e2e suites set up their bootstrap cluster from one config.
type SuiteInput struct {
	// Name names the suite's log directory (fleet-e2e-<Name>-*) and its
	// control planes when their options name none.
	Name string
	// LogDir, when set, is the log directory to use instead of a new one
	// (for manager options that point into it, such as GitCacheDir).
	LogDir string
	// Upstream, when set, starts the manager's control plane
	// (Suite.Upstream, with an admin client in Suite.Admin); its Name
	// defaults to <Name>-up.
	Upstream *controlplane.Options
	// Downstreams is how many downstream control planes to start
	// (Suite.Downstreams), each with DownstreamOptions, named
	// <DownstreamOptions.Name>-0, -1, ... (default <Name>-down-0, ...).
	Downstreams       int
	DownstreamOptions controlplane.Options
	// Extra are further control planes started alongside (a second
	// manager's cluster, ...), in Suite.Extra in the same order.
	Extra []controlplane.Options
	// Binaries builds the fleet binaries (framework.Binaries) while the
	// control planes start. They are removed at the end of the suite,
	// as are those a spec built on first use (framework.Run).
	Binaries bool
	// Manager, when set, runs the manager's controllers in this process
	// against Upstream with exactly the rights `fleet install controller`
	// gives it (framework.StartManager). APIServerURL and APIServerCA
	// default to Upstream's.
	Manager *controllers.Options
	// ManagerMetrics serves the manager's metrics on a free loopback port,
	// whose URL is Suite.MetricsURL.
	ManagerMetrics bool
	// DevLogs writes controller-runtime's log in development mode (more
	// detail, stack traces on warnings); otherwise in production mode. Both
	// go to GinkgoWriter.
	DevLogs bool
}

// Suite is what SetUpSuite started. Specs read it through their SpecInput
// getters, never write it.
type Suite struct {
	Input SuiteInput
	// Upstream is the manager's control plane and Admin an admin client of
	// it with the manager's scheme (nil without SuiteInput.Upstream).
	Upstream *controlplane.ControlPlane
	Admin    client.Client
	// Downstreams and Extra are the other control planes, as the input
	// asked for them.
	Downstreams []*controlplane.ControlPlane
	Extra       []*controlplane.ControlPlane
	// LogDir receives the logs of the processes the specs start (agents,
	// managers); it is kept after the suite for a look.
	LogDir string
	// ManagerCache is the in-process manager's cache, MetricsURL its
	// metrics endpoint (with SuiteInput.ManagerMetrics).
	ManagerCache cache.Cache
	MetricsURL   string
}

// SetUpSuite starts what in asks for and registers its teardown with
// DeferCleanup: call it in BeforeSuite. What a suite adds after it (a git
// server, a second manager) it stops with DeferCleanup of its own, which runs
// first.
func SetUpSuite(ctx context.Context, in SuiteInput) *Suite {
	ginkgo.GinkgoHelper()
	gomega.Expect(in.Name).NotTo(gomega.BeEmpty(), "SuiteInput.Name is required")
	gomega.Expect(in.Manager == nil || in.Upstream != nil).To(gomega.BeTrue(), "SuiteInput.Manager needs SuiteInput.Upstream")
	ctrl.SetLogger(zap.New(zap.WriteTo(ginkgo.GinkgoWriter), zap.UseDevMode(in.DevLogs)))
	s := &Suite{Input: in}
	ginkgo.DeferCleanup(s.tearDown)

	var err error
	s.LogDir = in.LogDir
	if s.LogDir == "" {
		s.LogDir, err = os.MkdirTemp("", "fleet-e2e-"+in.Name+"-")
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
	}
	s.startControlPlanes()
	if in.Upstream != nil {
		s.Admin, err = s.Upstream.Client(controllers.Scheme())
		gomega.Expect(err).NotTo(gomega.HaveOccurred())
	}
	if in.Manager != nil {
		s.startManager(ctx, *in.Manager)
	}
	ginkgo.GinkgoWriter.Printf("Logs of agents and managers are in %s\n", s.LogDir)
	return s
}

// startControlPlanes starts every control plane of the input at once, and
// builds the binaries meanwhile.
func (s *Suite) startControlPlanes() {
	ginkgo.GinkgoHelper()
	in := s.Input
	var started []chan error
	run := func(f func() error) {
		done := make(chan error, 1)
		go func() { done <- f() }()
		started = append(started, done)
	}
	if in.Binaries {
		run(func() error { _, err := framework.Binaries(); return err })
	}
	if in.Upstream != nil {
		o := *in.Upstream
		if o.Name == "" {
			o.Name = in.Name + "-up"
		}
		run(func() (err error) { s.Upstream, err = controlplane.Start(o); return err })
	}
	if in.Downstreams > 0 {
		prefix := in.DownstreamOptions.Name
		if prefix == "" {
			prefix = in.Name + "-down"
		}
		run(func() (err error) {
			s.Downstreams, err = controlplane.StartN(in.Downstreams, prefix, in.DownstreamOptions)
			return err
		})
	}
	s.Extra = make([]*controlplane.ControlPlane, len(in.Extra))
	for i, o := range in.Extra {
		run(func() (err error) { s.Extra[i], err = controlplane.Start(o); return err })
	}
	// Wait for every start, so that teardown sees every control plane that
	// started even when another failed.
	errs := make([]error, len(started))
	for i, done := range started {
		errs[i] = <-done
	}
	gomega.Expect(errors.Join(errs...)).To(gomega.Succeed(), "starting the control planes and building the binaries")
}

// startManager runs the manager's controllers in this process on Upstream.
func (s *Suite) startManager(ctx context.Context, o controllers.Options) {
	ginkgo.GinkgoHelper()
	if o.APIServerURL == "" {
		o.APIServerURL = s.Upstream.Config.Host
	}
	if o.APIServerCA == nil {
		o.APIServerCA = s.Upstream.Config.CAData
	}
	cfg := rest.CopyConfig(s.Upstream.Config)
	var (
		stop func()
		err  error
	)
	if s.Input.ManagerMetrics {
		stop, s.MetricsURL, err = framework.StartManagerServingMetrics(ctx, cfg, o)
	} else {
		stop, s.ManagerCache, err = framework.StartManagerWithCache(ctx, cfg, o)
	}
	gomega.Expect(err).NotTo(gomega.HaveOccurred())
	ginkgo.DeferCleanup(stop)
}

// ControlPlanes returns every control plane of the suite: Upstream,
// Downstreams, then Extra.
func (s *Suite) ControlPlanes() []*controlplane.ControlPlane {
	var cps []*controlplane.ControlPlane
	if s.Upstream != nil {
		cps = append(cps, s.Upstream)
	}
	cps = append(cps, s.Downstreams...)
	return append(cps, s.Extra...)
}

// tearDown stops every control plane started and removes the binaries; the
// log directory stays.
func (s *Suite) tearDown() {
	for _, cp := range s.ControlPlanes() {
		if cp != nil {
			_ = cp.Stop()
		}
	}
	// Specs may build the binaries on first use (framework.Run) even when
	// the suite did not ask for them.
	framework.RemoveBinaries()
}
