// Package capi_test is the end-to-end suite of manager-initiated registration
// and Cluster API enrollment: a manager control plane with Cluster API's
// Cluster CRD, three workload control planes, the manager's controllers (with
// the clusterimport and capi reconcilers) in this process, and the real
// fleet-agent binary, started by a stand-in kubelet from exactly the objects
// the manager installed downstream. The test plays Cluster API: it creates
// the Cluster API Clusters, marks their control planes initialized and writes
// their kubeconfig Secrets.
package capi_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/controllers/capi"
	"github.com/gitfleet/fleet/controllers/clusterimport"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework"
)

func TestCAPI(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Manager-initiated registration and Cluster API enrollment")
}

// The import controller's stale-agent time in this suite: short, so that
// healing can be watched. The agent check-in and the periodic check follow
// it (a third of it each).
const (
	staleAfter      = 12 * time.Second
	checkinInterval = staleAfter / 3
	checkInterval   = staleAfter / 3
	remoteTimeout   = clusterimport.DefaultRemoteTimeout
)

var (
	ctx         context.Context
	cancel      context.CancelFunc
	upstream    *controlplane.ControlPlane
	workloads   []*controlplane.ControlPlane
	admin       client.WithWatch // manager cluster, admin, with Cluster API types
	logDir      string
	managerDone chan error
)

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	ctx, cancel = context.WithCancel(context.Background())
	var err error
	logDir, err = os.MkdirTemp("", "fleet-e2e-capi-")
	Expect(err).NotTo(HaveOccurred())

	// Build the binaries while the control planes start.
	built := make(chan error, 1)
	go func() { _, err := framework.Binaries(); built <- err }()
	up := make(chan error, 1)
	go func() {
		var err error
		upstream, err = controlplane.Start(controlplane.Options{Name: "manager", CAPI: true})
		up <- err
	}()
	workloads, err = controlplane.StartN(3, "workload", controlplane.Options{NoCRDs: true})
	Expect(err).NotTo(HaveOccurred())
	Expect(<-up).To(Succeed())
	Expect(<-built).To(Succeed())

	scheme := controllers.Scheme()
	Expect(capi.AddToScheme(scheme)).To(Succeed())
	admin, err = client.NewWithWatch(upstream.Config, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	// The manager as controllers.Setup wires it, the clusterimport and capi
	// reconcilers included.
	mgr, err := ctrl.NewManager(upstream.Config, ctrl.Options{Scheme: scheme, Metrics: metricsserver.Options{BindAddress: "0"}})
	Expect(err).NotTo(HaveOccurred())
	installed, err := capi.Installed(mgr.GetRESTMapper())
	Expect(err).NotTo(HaveOccurred())
	Expect(installed).To(BeTrue())
	Expect(controllers.Setup(ctx, mgr, controllers.Options{
		APIServerURL: upstream.Config.Host, APIServerCA: upstream.Config.CAData, ImportStaleAfter: staleAfter,
	})).To(Succeed())
	managerDone = make(chan error, 1)
	go func() { managerDone <- mgr.Start(ctx) }()
	Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())

	Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	GinkgoWriter.Printf("Logs of agents are in %s\n", logDir)
	fmt.Println("Logs of agents are in", logDir)
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
		if managerDone != nil {
			<-managerDone
		}
	}
	stopKubelets()
	for _, cp := range append([]*controlplane.ControlPlane{upstream}, workloads...) {
		_ = cp.Stop()
	}
	framework.RemoveBinaries()
})
