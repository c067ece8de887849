package badinput_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/test/chartrepo"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/e2e/badinput"
	"github.com/gitfleet/fleet/test/framework"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// globalWebhookSecret is the manager's webhook secret for GitRepos that name
// none of their own, as the healthy one.
const globalWebhookSecret = "global-s3cret"

// suiteInput is what the suite runs against: the manager's control plane
// with the manager's controllers in this process (its webhook server and
// git cache set in setUp), a downstream control plane, and the binaries.
var suiteInput = e2e.SuiteInput{
	Name:              "badinput",
	Upstream:          &controlplane.Options{Name: "badinput-manager"},
	Downstreams:       1,
	DownstreamOptions: controlplane.Options{Name: "badinput-agent", NoCRDs: true},
	Binaries:          true,
	Manager: &controllers.Options{
		ContentGrace:  2 * time.Second,
		GitWorkers:    8,
		Workers:       8,
		WebhookSecret: []byte(globalWebhookSecret),
	},
}

// setUp starts the suite with a webhook address and a git cache of its own,
// then a git server and a chart repository, and returns what the spec runs
// against.
func setUp(ctx context.Context) badinput.SpecInput {
	addr, err := framework.FreeAddr()
	Expect(err).NotTo(HaveOccurred())
	in := suiteInput
	manager := *in.Manager
	manager.WebhookAddr = addr
	// The git cache stays beside the logs, for a look when the suite failed.
	in.LogDir, err = os.MkdirTemp("", "fleet-e2e-badinput-")
	Expect(err).NotTo(HaveOccurred())
	manager.GitCacheDir = filepath.Join(in.LogDir, "git-cache")
	in.Manager = &manager
	s := e2e.SetUpSuite(ctx, in)

	gitRoot := filepath.Join(s.LogDir, "git")
	Expect(os.MkdirAll(gitRoot, 0o755)).To(Succeed())
	gitServer := gittest.NewServer(gitRoot)
	DeferCleanup(gitServer.Close)
	chartRepo, err := chartrepo.New([]chartrepo.Chart{{Name: "remote-web", Version: "1.0.0", Values: "replicas: 1\n",
		Templates: map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: remote}\n"}}}, chartrepo.Options{})
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(chartRepo.Close)
	return badinput.SpecInput{Upstream: s.Upstream, Downstream: s.Downstreams[0], Admin: s.Admin, LogDir: s.LogDir,
		GitRoot: gitRoot, GitServer: gitServer, ChartRepo: chartRepo,
		WebhookURL: "http://" + addr + "/", WebhookSecret: globalWebhookSecret}
}

func TestBadInput(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	var in badinput.SpecInput
	BeforeSuite(func() { in = setUp(ctx) })
	// The logs, repositories and caches stay for a look when the suite failed.
	ReportAfterSuite("removing the logs of a passing run", func(r Report) {
		if r.SuiteSucceeded && in.LogDir != "" {
			_ = os.RemoveAll(in.LogDir)
		}
	})
	Describe("Bad input", Ordered, ContinueOnFailure, func() { badinput.BadInputSpec(ctx, func() badinput.SpecInput { return in }) })
	RunSpecs(t, "Bad input")
}
