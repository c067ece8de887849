// Package badinput_test feeds the real system bad input of every kind, one
// table entry per kind, and checks two things each time: that the system says
// clearly what is wrong (a False condition naming the problem, an API
// rejection naming the field, an HTTP error, a CLI error, a refused
// registration), and that nothing else was disturbed: a healthy GitRepo, its
// Bundles and their BundleDeployments, set up before any bad input arrives,
// keep exactly their objects, generations, deploymentIDs and resourceVersions,
// and the manager still fans out a fresh bundle at the end.
//
// Everything is real: a manager control plane with the manager's controllers
// in this process (its webhook server included), a downstream control plane
// registered with the `fleet` CLI and running the `fleet-agent` binary, git
// repositories served over HTTP on loopback, a Helm chart repository on
// loopback, and the `fleet` CLI.
package badinput_test

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gitfleet/fleet/agent/registration"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/test/chartrepo"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework"
)

func TestBadInput(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Bad input")
}

const (
	ws = fleet.DefaultWorkspace
	// globalWebhookSecret is the manager's webhook secret for GitRepos that
	// name none of their own, as the healthy one.
	globalWebhookSecret = "global-s3cret"
	// agentEnv is the env label of the cluster with a real agent.
	agentEnv = "agent"
)

var (
	ctx         = context.Background()
	upstream    *controlplane.ControlPlane
	downstream  *controlplane.ControlPlane
	admin       client.Client // manager cluster, admin
	local       client.Client // downstream cluster, admin
	stopManager func()
	logDir      string
	gitRoot     string
	gitServer   *gittest.Server
	chartRepo   *chartrepo.Repo
	webhookURL  string
	agent       *framework.Process
	// agentCluster is the Fleet Cluster of the downstream control plane.
	agentCluster *fleet.Cluster
	agentCred    *registration.Credential
)

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter)))
	var err error
	logDir, err = os.MkdirTemp("", "fleet-e2e-badinput-")
	Expect(err).NotTo(HaveOccurred())

	// Build the binaries while the control planes start.
	built := make(chan error, 1)
	go func() { _, err := framework.Binaries(); built <- err }()
	up := make(chan error, 1)
	go func() {
		var err error
		upstream, err = controlplane.Start(controlplane.Options{Name: "badinput-manager"})
		up <- err
	}()
	downstream, err = controlplane.Start(controlplane.Options{Name: "badinput-agent", NoCRDs: true})
	Expect(err).NotTo(HaveOccurred())
	Expect(<-up).To(Succeed())

	admin, err = upstream.Client(controllers.Scheme())
	Expect(err).NotTo(HaveOccurred())
	local, err = downstream.Client(registration.Scheme())
	Expect(err).NotTo(HaveOccurred())

	addr := freeAddr()
	webhookURL = "http://" + addr + "/"
	stopManager, err = framework.StartManager(ctx, upstream.Config, controllers.Options{
		APIServerURL:  upstream.Config.Host,
		APIServerCA:   upstream.Config.CAData,
		ContentGrace:  2 * time.Second,
		GitCacheDir:   filepath.Join(logDir, "git-cache"),
		GitWorkers:    8,
		Workers:       8,
		WebhookAddr:   addr,
		WebhookSecret: []byte(globalWebhookSecret),
	})
	Expect(err).NotTo(HaveOccurred())

	gitRoot = filepath.Join(logDir, "git")
	Expect(os.MkdirAll(gitRoot, 0o755)).To(Succeed())
	gitServer = gittest.NewServer(gitRoot)
	chartRepo, err = chartrepo.New([]chartrepo.Chart{{Name: "remote-web", Version: "1.0.0", Values: "replicas: 1\n",
		Templates: map[string]string{"cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: remote}\n"}}}, chartrepo.Options{})
	Expect(err).NotTo(HaveOccurred())

	// The healthy fleet starts while the binaries are still being built.
	startHealthy()
	Expect(<-built).To(Succeed())
	joinAgent()
	waitHealthy()
	GinkgoWriter.Printf("Logs are in %s (removed when the suite passes)\n", logDir)
})

var _ = AfterSuite(func() {
	agent.Stop()
	if stopManager != nil {
		stopManager()
	}
	if gitServer != nil {
		gitServer.Close()
	}
	if chartRepo != nil {
		chartRepo.Close()
	}
	for _, cp := range []*controlplane.ControlPlane{upstream, downstream} {
		if cp != nil {
			_ = cp.Stop()
		}
	}
	framework.RemoveBinaries()
})

// The logs, repositories and caches stay for a look when the suite failed.
var _ = ReportAfterSuite("removing the logs of a passing run", func(r Report) {
	if r.SuiteSucceeded && logDir != "" {
		_ = os.RemoveAll(logDir)
	}
})

// joinAgent registers the downstream cluster as a person would: the token
// and config manifests printed by the CLI, applied downstream, and the agent
// started from them.
func joinAgent() {
	tokenYAML, err := framework.Run("fleet", "install", "agent-token", "-k", upstream.Kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	Expect(framework.ApplyYAML(ctx, local, tokenYAML)).To(Succeed())
	configYAML, err := framework.Run("fleet", "install", "agent-config", "-l", "env="+agentEnv)
	Expect(err).NotTo(HaveOccurred())
	Expect(framework.ApplyYAML(ctx, local, configYAML)).To(Succeed())
	agent, err = framework.Start(logDir, "agent", "fleet-agent",
		"--kubeconfig", downstream.Kubeconfig, "--checkin-interval", "5s",
		"--min-backoff", "100ms", "--max-backoff", "2s", "--resync", "30s")
	Expect(err).NotTo(HaveOccurred())
	Eventually(func(g Gomega) {
		cred, err := registration.LoadStored(ctx, local, fleet.DefaultSystemNamespace)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cred).NotTo(BeNil(), "no credential stored yet; agent log:\n%s", agent.Tail(4000))
		agentCred = cred
	}, 60*time.Second, 200*time.Millisecond).Should(Succeed())
	agentCluster = &fleet.Cluster{}
	Expect(admin.Get(ctx, types.NamespacedName{Namespace: agentCred.Namespace, Name: agentCred.ClusterName}, agentCluster)).To(Succeed())
	Expect(agentCluster.Labels).To(HaveKeyWithValue("env", agentEnv))
}

// freeAddr returns a loopback address with a port nobody listens on.
func freeAddr() string {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	Expect(err).NotTo(HaveOccurred())
	addr := l.Addr().String()
	Expect(l.Close()).To(Succeed())
	return addr
}

// Timeouts: generous but bounded; everything here reacts within seconds.
const (
	timeout = 30 * time.Second
	poll    = 100 * time.Millisecond
)

func every(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

func must(err error) {
	GinkgoHelper()
	Expect(err).NotTo(HaveOccurred())
}

func describe(obj client.Object) string {
	return fmt.Sprintf("%s/%s", obj.GetNamespace(), obj.GetName())
}
