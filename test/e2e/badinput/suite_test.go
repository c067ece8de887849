package badinput_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/test/chartrepo"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/e2e/badinput"
	"github.com/gitfleet/fleet/test/framework"
)

// globalWebhookSecret is the manager's webhook secret for GitRepos that name
// none of their own, as the healthy one.
const globalWebhookSecret = "global-s3cret"

// suite is what BeforeSuite sets up: the manager's control plane with the
// manager's controllers in this process (its webhook server included), a
// downstream control plane, a git server, a chart repository, the binaries.
type suite struct {
	upstream    *controlplane.ControlPlane
	downstream  *controlplane.ControlPlane
	admin       client.Client // manager cluster, admin
	stopManager func()
	logDir      string
	gitRoot     string
	gitServer   *gittest.Server
	chartRepo   *chartrepo.Repo
	webhookURL  string
}

func (s *suite) setUp(ctx context.Context) {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	var err error
	s.logDir, err = os.MkdirTemp("", "fleet-e2e-badinput-")
	Expect(err).NotTo(HaveOccurred())

	// Build the binaries while the control planes start.
	built := make(chan error, 1)
	go func() { _, err := framework.Binaries(); built <- err }()
	up := make(chan error, 1)
	go func() {
		var err error
		s.upstream, err = controlplane.Start(controlplane.Options{Name: "badinput-manager"})
		up <- err
	}()
	s.downstream, err = controlplane.Start(controlplane.Options{Name: "badinput-agent", NoCRDs: true})
	Expect(err).NotTo(HaveOccurred())
	Expect(<-up).To(Succeed())

	s.admin, err = s.upstream.Client(controllers.Scheme())
	Expect(err).NotTo(HaveOccurred())

	addr, err := framework.FreeAddr()
	Expect(err).NotTo(HaveOccurred())
	s.webhookURL = "http://" + addr + "/"
	s.stopManager, err = framework.StartManager(ctx, s.upstream.Config, controllers.Options{
		APIServerURL:  s.upstream.Config.Host,
		APIServerCA:   s.upstream.Config.CAData,
		ContentGrace:  2 * time.Second,
		GitCacheDir:   filepath.Join(s.logDir, "git-cache"),
		GitWorkers:    8,
		Workers:       8,
		WebhookAddr:   addr,
		WebhookSecret: []byte(globalWebhookSecret),
	})
	Expect(err).NotTo(HaveOccurred())

	s.gitRoot = filepath.Join(s.logDir, "git")
	Expect(os.MkdirAll(s.gitRoot, 0o755)).To(Succeed())
	s.gitServer = gittest.NewServer(s.gitRoot)
	s.chartRepo, err = chartrepo.New([]chartrepo.Chart{{Name: "remote-web", Version: "1.0.0", Values: "replicas: 1\n",
		Templates: map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: remote}\n"}}}, chartrepo.Options{})
	Expect(err).NotTo(HaveOccurred())
	Expect(<-built).To(Succeed())
	GinkgoWriter.Printf("Logs are in %s (removed when the suite passes)\n", s.logDir)
}

func (s *suite) tearDown() {
	if s.stopManager != nil {
		s.stopManager()
	}
	if s.gitServer != nil {
		s.gitServer.Close()
	}
	if s.chartRepo != nil {
		s.chartRepo.Close()
	}
	for _, cp := range []*controlplane.ControlPlane{s.upstream, s.downstream} {
		if cp != nil {
			_ = cp.Stop()
		}
	}
	framework.RemoveBinaries()
}

func (s *suite) input() badinput.SpecInput {
	return badinput.SpecInput{Upstream: s.upstream, Downstream: s.downstream, Admin: s.admin, LogDir: s.logDir,
		GitRoot: s.gitRoot, GitServer: s.gitServer, ChartRepo: s.chartRepo,
		WebhookURL: s.webhookURL, WebhookSecret: globalWebhookSecret}
}

func TestBadInput(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	s := &suite{}
	BeforeSuite(func() { s.setUp(ctx) })
	AfterSuite(s.tearDown)
	// The logs, repositories and caches stay for a look when the suite failed.
	ReportAfterSuite("removing the logs of a passing run", func(r Report) {
		if r.SuiteSucceeded && s.logDir != "" {
			_ = os.RemoveAll(s.logDir)
		}
	})
	Describe("Bad input", Ordered, ContinueOnFailure, func() { badinput.BadInputSpec(ctx, s.input) })
	RunSpecs(t, "Bad input")
}
