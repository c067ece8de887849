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
	"sigs.k8s.io/controller-runtime/pkg/config"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/e2e/agentupgrade"
	"github.com/gitfleet/fleet/test/framework"
	"github.com/gitfleet/fleet/test/framework/e2e"
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

// suiteInput is what the suite runs against: the manager's control plane
// and ten downstream control planes running kube-controller-manager. The
// manager runs in this process, started by the spec (startManager), and the
// agents are two builds of fleet-agent stamped with different versions.
var suiteInput = e2e.SuiteInput{
	Name:        "agentupgrade",
	Upstream:    &controlplane.Options{Name: "agentupgrade-up", StartTimeout: 3 * time.Minute},
	Downstreams: clusters,
	DownstreamOptions: controlplane.Options{Name: "agentupgrade",
		NoCRDs: true, Workloads: &controlplane.Workloads{ControllersOnly: true}, StartTimeout: 3 * time.Minute},
	DevLogs: true,
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

// buildAgents builds the old and the new agent into binDir, and returns a
// function that waits for them and maps each image to its fleet-agent.
func buildAgents(binDir string) func() map[string]string {
	type build struct {
		image, path string
		err         error
	}
	built := make(chan build, 2)
	for image, version := range map[string]string{oldImage: "v1.0.0", newImage: "v1.1.0"} {
		go func() {
			path, err := buildAgent(binDir, version)
			built <- build{image, path, err}
		}()
	}
	return func() map[string]string {
		GinkgoHelper()
		binaries := map[string]string{}
		for range 2 {
			b := <-built
			Expect(b.err).NotTo(HaveOccurred())
			binaries[b.image] = b.path
		}
		return binaries
	}
}

// startManager runs the manager's controllers in this process, with the
// rights of its ServiceAccount (framework.ManagerConfig), offering image.
// It may run again after the last one stopped: a new manager version
// offering a new agent image.
func startManager(ctx context.Context, upstream *controlplane.ControlPlane, image string) func() {
	GinkgoHelper()
	cfg, err := framework.ManagerConfig(ctx, upstream.Config)
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
		APIServerURL: upstream.Config.Host, APIServerCA: upstream.Config.CAData, DisableLocalCluster: true,
		AgentImage: image, AgentBundles: true, AgentMaxUnavailable: &budget,
	})).To(Succeed())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	Expect(mgr.GetCache().WaitForCacheSync(mctx)).To(BeTrue())
	return func() { cancel(); Expect(<-done).To(Succeed()) }
}

func TestAgentUpgrade(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	var input agentupgrade.SpecInput
	BeforeSuite(func() {
		binDir, err := os.MkdirTemp("", "fleet-e2e-agentupgrade-bin-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, binDir)
		// Build the two agents while the control planes start.
		binaries := buildAgents(binDir)
		s := e2e.SetUpSuite(ctx, suiteInput)
		input = agentupgrade.SpecInput{
			Upstream: s.Upstream, Admin: s.Admin, Downstreams: s.Downstreams, LogDir: s.LogDir,
			Binaries:     binaries(),
			Versions:     map[string]string{oldImage: "v1.0.0", newImage: "v1.1.0"},
			OldImage:     oldImage,
			NewImage:     newImage,
			BrokenImage:  brokenImage,
			StartManager: func(image string) func() { return startManager(ctx, s.Upstream, image) },
			MaxInFlight:  maxInFlight,
		}
	})
	Describe("Agent settings and upgrades through agent Bundles", Ordered, func() {
		agentupgrade.AgentUpgradeSpec(ctx, func() agentupgrade.SpecInput { return input })
	})
	RunSpecs(t, "Agent upgrades")
}
