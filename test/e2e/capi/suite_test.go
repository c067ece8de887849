package capi_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/controllers/capi"
	"github.com/gitfleet/fleet/test/controlplane"
	capie2e "github.com/gitfleet/fleet/test/e2e/capi"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// staleAfter is the import controller's stale-agent time in this suite:
// short, so that healing can be watched.
const staleAfter = 12 * time.Second

// suiteInput is what the suite runs against: two manager control planes
// with Cluster API's CRD (the second, Extra[0], is where MoveSpec moves a
// cluster to), three workload control planes, and the binaries. Each manager
// runs in this process (startManager).
var suiteInput = e2e.SuiteInput{
	Name:              "capi",
	Upstream:          &controlplane.Options{Name: "manager", CAPI: true},
	Extra:             []controlplane.Options{{Name: "target", CAPI: true}},
	Downstreams:       3,
	DownstreamOptions: controlplane.Options{Name: "workload", NoCRDs: true},
	Binaries:          true,
	DevLogs:           true,
}

// setUp starts the suite and a manager on each management cluster, and
// returns what the specs run against.
func setUp(ctx context.Context) capie2e.SpecInput {
	s := e2e.SetUpSuite(ctx, suiteInput)
	// ClusterGroups per ClusterClass, as CAAPF keeps them when asked to.
	admin := startManager(ctx, s.Upstream, controllers.Options{CAPIClusterClassGroups: true})
	// The target enrolls by opt-in, as --capi-cluster-selector and
	// --capi-namespace-selector set it.
	targetAdmin := startManager(ctx, s.Extra[0], controllers.Options{
		CAPIClusterSelector: capie2e.OptInClusterSelector, CAPINamespaceSelector: capie2e.OptInNamespaceSelector})
	fmt.Println("Logs of agents are in", s.LogDir)
	return capie2e.SpecInput{Upstream: s.Upstream, Workloads: s.Downstreams, Admin: admin, LogDir: s.LogDir,
		ImportStaleAfter: staleAfter, Target: s.Extra[0], TargetAdmin: targetAdmin}
}

// startManager runs the manager on cp as controllers.Setup wires it, the
// clusterimport and capi reconcilers included, until the end of the suite,
// and returns an admin client of cp that knows Cluster API's types.
func startManager(ctx context.Context, cp *controlplane.ControlPlane, o controllers.Options) client.WithWatch {
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
	ctx, cancel := context.WithCancel(ctx)
	Expect(controllers.Setup(ctx, mgr, o)).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	DeferCleanup(func() {
		cancel()
		<-done //nolint:errcheck // only waits for the manager to stop: the spec is over, and Start's error (nil when cancelled) concerns no test
	})
	Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())
	return admin
}

func TestCAPI(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	var input capie2e.SpecInput
	BeforeSuite(func() { input = setUp(ctx) })
	inputGetter := func() capie2e.SpecInput { return input }
	Describe("Cluster API enrollment", Ordered, ContinueOnFailure, func() { capie2e.EnrollmentSpec(ctx, inputGetter) })
	Describe("Un-enrollment", Ordered, ContinueOnFailure, func() { capie2e.UnenrollSpec(ctx, inputGetter) })
	Describe("An onboarding storm", func() { capie2e.OnboardingStormSpec(ctx, inputGetter) })
	Describe("Opt-in enrollment", Ordered, ContinueOnFailure, func() { capie2e.OptInSpec(ctx, inputGetter) })
	Describe("clusterctl move", Ordered, ContinueOnFailure, func() { capie2e.MoveSpec(ctx, inputGetter) })
	RunSpecs(t, "Manager-initiated registration and Cluster API enrollment")
}
