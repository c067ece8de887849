package agentupgrade_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/e2e/agentupgrade"
	"github.com/gitfleet/fleet/test/framework"
)

const (
	clusters = 10
	// maxUnavailable is the manager's --agent-max-unavailable: 2 of 10.
	maxUnavailable = "20%"
	maxInFlight    = 2

	oldImage    = "registry.test/fleet-agent:v1.0.0"
	newImage    = "registry.test/fleet-agent:v1.1.0"
	brokenImage = "registry.test/fleet-agent:v1.2.0-broken"
)

// suite is what BeforeSuite sets up: the manager's control plane, ten
// downstream control planes running kube-controller-manager, and two builds
// of fleet-agent stamped with different versions.
type suite struct {
	upstream    *controlplane.ControlPlane
	downstreams []*controlplane.ControlPlane
	admin       client.Client
	logDir      string
	binDir      string
	binaries    map[string]string
}

// buildAgent builds fleet-agent and fleet-agent-deploy stamped with version,
// as `make build VERSION=...` does, into a directory of their own (as an
// image holds them: the agent finds its deploy binary beside itself), and
// returns the agent's path.
func buildAgent(dir, version string) (string, error) {
	out := filepath.Join(dir, version)
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w -X github.com/gitfleet/fleet/internal/version.version="+version,
		"-o", out+string(os.PathSeparator), "./cmd/fleet-agent", "./cmd/fleet-agent-deploy")
	cmd.Dir = framework.RepoRoot()
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building fleet-agent %s: %v\n%s", version, err, b)
	}
	return filepath.Join(out, "fleet-agent"), nil
}

func (s *suite) setUp() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	var err error
	s.logDir, err = os.MkdirTemp("", "fleet-e2e-agentupgrade-")
	Expect(err).NotTo(HaveOccurred())
	s.binDir, err = os.MkdirTemp("", "fleet-e2e-agentupgrade-bin-")
	Expect(err).NotTo(HaveOccurred())

	// Build the two agents while the control planes start.
	type build struct{ image, path string }
	built := make(chan build, 2)
	buildErrs := make(chan error, 2)
	for image, version := range map[string]string{oldImage: "v1.0.0", newImage: "v1.1.0"} {
		go func() {
			path, err := buildAgent(s.binDir, version)
			built <- build{image, path}
			buildErrs <- err
		}()
	}
	up := make(chan error, 1)
	go func() {
		var err error
		s.upstream, err = controlplane.Start(controlplane.Options{Name: "agentupgrade-up", StartTimeout: 3 * time.Minute})
		up <- err
	}()
	s.downstreams, err = controlplane.StartN(clusters, "agentupgrade", controlplane.Options{
		NoCRDs: true, Workloads: &controlplane.Workloads{ControllersOnly: true}, StartTimeout: 3 * time.Minute})
	Expect(err).NotTo(HaveOccurred())
	Expect(<-up).To(Succeed())
	s.binaries = map[string]string{}
	for range 2 {
		b := <-built
		Expect(<-buildErrs).To(Succeed())
		s.binaries[b.image] = b.path
	}
	s.admin, err = s.upstream.Client(controllers.Scheme())
	Expect(err).NotTo(HaveOccurred())
}

// startManager runs the manager's controllers in this process, with the
// rights of its ServiceAccount (framework.ManagerConfig), offering image.
// It may run again after the last one stopped: a new manager version
// offering a new agent image.
func (s *suite) startManager(ctx context.Context, image string) func() {
	GinkgoHelper()
	cfg, err := framework.ManagerConfig(ctx, s.upstream.Config)
	Expect(err).NotTo(HaveOccurred())
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:     controllers.Scheme(),
		Cache:      controllers.CacheOptions(controllers.Options{}),
		Metrics:    metricsserver.Options{BindAddress: "0"},
		Controller: config.Controller{SkipNameValidation: ptr.To(true), UsePriorityQueue: ptr.To(false)},
	})
	Expect(err).NotTo(HaveOccurred())
	mctx, cancel := context.WithCancel(ctx)
	budget := intstr.FromString(maxUnavailable)
	Expect(controllers.Setup(mctx, mgr, controllers.Options{
		APIServerURL: s.upstream.Config.Host, APIServerCA: s.upstream.Config.CAData, DisableLocalCluster: true,
		AgentImage: image, AgentBundles: true, AgentMaxUnavailable: &budget,
	})).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	Expect(mgr.GetCache().WaitForCacheSync(mctx)).To(BeTrue())
	return func() { cancel(); Expect(<-done).To(Succeed()) }
}

func (s *suite) tearDown() {
	for _, cp := range append([]*controlplane.ControlPlane{s.upstream}, s.downstreams...) {
		if cp != nil {
			_ = cp.Stop()
		}
	}
	_ = os.RemoveAll(s.binDir)
}

func (s *suite) input(ctx context.Context) agentupgrade.SpecInput {
	return agentupgrade.SpecInput{
		Upstream: s.upstream, Admin: s.admin, Downstreams: s.downstreams, LogDir: s.logDir,
		Binaries:     s.binaries,
		Versions:     map[string]string{oldImage: "v1.0.0", newImage: "v1.1.0"},
		OldImage:     oldImage,
		NewImage:     newImage,
		BrokenImage:  brokenImage,
		StartManager: func(image string) func() { return s.startManager(ctx, image) },
		MaxInFlight:  maxInFlight,
	}
}

func TestAgentUpgrade(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	s := &suite{}
	BeforeSuite(s.setUp)
	AfterSuite(s.tearDown)
	Describe("Agent settings and upgrades through agent Bundles", Ordered, func() {
		agentupgrade.AgentUpgradeSpec(ctx, func() agentupgrade.SpecInput { return s.input(ctx) })
	})
	RunSpecs(t, "Agent upgrades")
}
