package capi_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/controllers/capi"
	"github.com/gitfleet/fleet/test/controlplane"
	capie2e "github.com/gitfleet/fleet/test/e2e/capi"
	"github.com/gitfleet/fleet/test/framework"
)

// staleAfter is the import controller's stale-agent time in this suite:
// short, so that healing can be watched.
const staleAfter = 12 * time.Second

// suite is what BeforeSuite sets up: two manager control planes with Cluster
// API's CRD, each with the manager's controllers in this process (the second
// is where MoveSpec moves a cluster to), three workload control planes, and
// the binaries.
type suite struct {
	cancel      context.CancelFunc
	upstream    *controlplane.ControlPlane
	workloads   []*controlplane.ControlPlane
	admin       client.WithWatch // manager cluster, admin, with Cluster API types
	logDir      string
	managerDone chan error
	// The management cluster Cluster API Clusters are moved to, with its own
	// manager.
	target      *controlplane.ControlPlane
	targetAdmin client.WithWatch
	targetDone  chan error
}

func (s *suite) setUp(ctx context.Context) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx, s.cancel = context.WithCancel(ctx)
	var err error
	s.logDir, err = os.MkdirTemp("", "fleet-e2e-capi-")
	Expect(err).NotTo(HaveOccurred())

	// Build the binaries while the control planes start.
	built := make(chan error, 1)
	go func() { _, err := framework.Binaries(); built <- err }()
	up := make(chan error, 1)
	go func() {
		var err error
		s.upstream, err = controlplane.Start(controlplane.Options{Name: "manager", CAPI: true})
		up <- err
	}()
	targetUp := make(chan error, 1)
	go func() {
		var err error
		s.target, err = controlplane.Start(controlplane.Options{Name: "target", CAPI: true})
		targetUp <- err
	}()
	s.workloads, err = controlplane.StartN(3, "workload", controlplane.Options{NoCRDs: true})
	Expect(err).NotTo(HaveOccurred())
	Expect(<-up).To(Succeed())
	Expect(<-targetUp).To(Succeed())
	Expect(<-built).To(Succeed())

	s.admin, s.managerDone = startManager(ctx, s.upstream, controllers.Options{})
	// The target enrolls by opt-in, as --capi-cluster-selector and
	// --capi-namespace-selector set it.
	s.targetAdmin, s.targetDone = startManager(ctx, s.target, controllers.Options{
		CAPIClusterSelector: capie2e.OptInClusterSelector, CAPINamespaceSelector: capie2e.OptInNamespaceSelector})

	GinkgoWriter.Printf("Logs of agents are in %s\n", s.logDir)
	fmt.Println("Logs of agents are in", s.logDir)
}

// startManager runs the manager on cp as controllers.Setup wires it, the
// clusterimport and capi reconcilers included, and returns an admin client
// of cp that knows Cluster API's types.
func startManager(ctx context.Context, cp *controlplane.ControlPlane, o controllers.Options) (client.WithWatch, chan error) {
	GinkgoHelper()
	scheme := controllers.Scheme()
	Expect(capi.AddToScheme(scheme)).To(Succeed())
	admin, err := client.NewWithWatch(cp.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
	// Two managers in one process have controllers of the same names.
	mgr, err := ctrl.NewManager(cp.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	Expect(err).NotTo(HaveOccurred())
	installed, err := capi.Installed(mgr.GetRESTMapper())
	Expect(err).NotTo(HaveOccurred())
	Expect(installed).To(BeTrue())
	o.APIServerURL, o.APIServerCA, o.ImportStaleAfter = cp.Config.Host, cp.Config.CAData, staleAfter
	Expect(controllers.Setup(ctx, mgr, o)).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())
	return admin, done
}

func (s *suite) tearDown() {
	if s.cancel != nil {
		s.cancel()
		for _, done := range []chan error{s.managerDone, s.targetDone} {
			if done != nil {
				<-done
			}
		}
	}
	for _, cp := range append([]*controlplane.ControlPlane{s.upstream, s.target}, s.workloads...) {
		if cp != nil {
			_ = cp.Stop()
		}
	}
	framework.RemoveBinaries()
}

func (s *suite) input() capie2e.SpecInput {
	return capie2e.SpecInput{Upstream: s.upstream, Workloads: s.workloads, Admin: s.admin, LogDir: s.logDir, ImportStaleAfter: staleAfter,
		Target: s.target, TargetAdmin: s.targetAdmin}
}

func TestCAPI(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	s := &suite{}
	BeforeSuite(func() { s.setUp(ctx) })
	AfterSuite(s.tearDown)
	Describe("Cluster API enrollment", Ordered, ContinueOnFailure, func() { capie2e.EnrollmentSpec(ctx, s.input) })
	Describe("Un-enrollment", Ordered, ContinueOnFailure, func() { capie2e.UnenrollSpec(ctx, s.input) })
	Describe("An onboarding storm", func() { capie2e.OnboardingStormSpec(ctx, s.input) })
	Describe("Opt-in enrollment", Ordered, ContinueOnFailure, func() { capie2e.OptInSpec(ctx, s.input) })
	Describe("clusterctl move", Ordered, ContinueOnFailure, func() { capie2e.MoveSpec(ctx, s.input) })
	RunSpecs(t, "Manager-initiated registration and Cluster API enrollment")
}
