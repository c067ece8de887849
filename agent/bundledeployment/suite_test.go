package bundledeployment_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/ecdh"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/gitfleet/fleet/agent/bundledeployment"
	"github.com/gitfleet/fleet/agent/deployrpc"
	"github.com/gitfleet/fleet/agent/downstream"
	"github.com/gitfleet/fleet/agent/kinds"
	"github.com/gitfleet/fleet/agent/monitor"
	"github.com/gitfleet/fleet/agent/upstream"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/sealing"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/envtest"
)

// clusterNamespace is the agent's cluster namespace upstream.
const clusterNamespace = "cluster-fleet-default-edge"

var (
	// up is the manager's control plane, where BundleDeployments and
	// Contents are written; no manager reconcilers run there.
	up *envtest.Environment
	// downCP is the agent's own cluster, where releases are installed, and
	// down an admin client of it.
	downCP  *controlplane.ControlPlane
	downErr error
	down    client.Client
	// deployBinary is fleet-agent-deploy, built for the tests.
	deployBinary string
	// agentKeys are the agent's sealing keys: testdata/agent-key.txt, for
	// which the SOPS files of testdata were encrypted.
	agentKeys []*ecdh.PrivateKey
)

func TestMain(m *testing.M) {
	ctx := context.Background()
	key, err := readKey("testdata/agent-key.txt")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	agentKeys = []*ecdh.PrivateKey{key, nil}
	bin, err := os.MkdirTemp("", "agent-controller-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	build := exec.Command("go", "build", "-o", bin+string(os.PathSeparator), "github.com/gitfleet/fleet/cmd/fleet-agent-deploy")
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building %s: %v\n%s", deployrpc.BinaryName, err, out)
		os.Exit(1)
	}
	deployBinary = filepath.Join(bin, deployrpc.BinaryName)
	// The downstream control plane starts while envtest starts upstream.
	type started struct {
		cp  *controlplane.ControlPlane
		err error
	}
	downstream := make(chan started, 1)
	go func() {
		cp, err := controlplane.Start(controlplane.Options{Name: "agent-controller-down", NoCRDs: true})
		downstream <- started{cp, err}
	}()
	code := envtest.Run(ctx, envtest.RunInput{
		M:          m,
		Name:       "agent-controller-up",
		Namespaces: []string{clusterNamespace},
		SetupEnv: func(e *envtest.Environment) {
			up = e
			d := <-downstream
			downstream <- d
			downCP, downErr = d.cp, d.err
		},
	})
	if d := <-downstream; d.cp != nil {
		_ = d.cp.Stop()
	}
	_ = os.RemoveAll(bin)
	os.Exit(code)
}

// runAgent runs the agent for the rest of the test t. It stops with t, so
// that no watch of the agent holds the control planes up when they stop.
func runAgent(t *testing.T) {
	t.Helper()
	t.Cleanup(runAgentWith(t, deployBinary))
}

// runAgentWith runs the agent with binary as its deploy binary until the
// returned function is called.
func runAgentWith(t *testing.T, binary string) func() {
	t.Helper()
	if downErr != nil {
		t.Fatalf("starting the downstream control plane: %v", downErr)
	}
	stop, err := startAgent(context.Background(), up.Config, downCP.Config, binary)
	if err != nil {
		t.Fatalf("starting the agent: %v", err)
	}
	return func() {
		if err := stop(); err != nil {
			t.Errorf("stopping the agent: %v", err)
		}
	}
}

// startAgent runs the agent's BundleDeployment reconciler as agent/deploy.go
// wires it: a manager whose cache holds only the cluster namespace
// upstream, the downstream cluster with the deploy binary, and a watcher.
func startAgent(ctx context.Context, manager, local *rest.Config, binary string) (func() error, error) {
	mgr, err := ctrl.NewManager(rest.CopyConfig(manager), ctrl.Options{
		Scheme:                 kinds.Scheme(),
		MapperProvider:         func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return upstream.Mapper(), nil },
		Cache:                  cache.Options{DefaultNamespaces: map[string]cache.Config{clusterNamespace: {}}},
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
	})
	if err != nil {
		return nil, err
	}
	if down, err = client.New(local, client.Options{Scheme: kinds.Scheme()}); err != nil {
		return nil, err
	}
	if binary == "" {
		return nil, fmt.Errorf("%s was not built", deployrpc.BinaryName)
	}
	dep, err := downstream.New(local, down, clusterNamespace, &deployrpc.Runner{
		Binary: binary, Config: local, ClusterNamespace: clusterNamespace, NamespaceMissingRetry: time.Second,
	})
	if err != nil {
		return nil, err
	}
	r := &bundledeployment.Reconciler{
		Upstream:         mgr.GetClient(),
		APIReader:        mgr.GetAPIReader(),
		Cache:            mgr.GetCache(),
		ClusterNamespace: clusterNamespace,
		SealingKeys:      func() []*ecdh.PrivateKey { return agentKeys },
		Downstream:       dep,
		Watcher: &monitor.Watcher{
			Dynamic: dep.Dynamic(), Mapper: dep.Mapper(),
			NameLabel: fleet.ReleaseNameLabel, NamespaceLabel: fleet.ReleaseNamespaceLabel,
		},
		// Only events bring BundleDeployments back during a test.
		Resync:     time.Hour,
		MinBackoff: 50 * time.Millisecond,
		MaxBackoff: time.Second,
	}
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	syncCtx, syncCancel := context.WithTimeout(mctx, time.Minute)
	defer syncCancel()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		cancel()
		return nil, errors.Join(fmt.Errorf("the agent's cache did not sync within a minute"), <-done)
	}
	return func() error {
		cancel()
		return <-done
	}, nil
}

// newContent writes a Content holding files, as the manager's bundle
// controller does, and returns a deploymentID that names it.
func newContent(ctx context.Context, t *testing.T, files map[string]string) string {
	t.Helper()
	resources := make([]fleet.BundleResource, 0, len(files))
	for name, content := range files {
		resources = append(resources, fleet.BundleResource{Name: name, Content: content})
	}
	raw, err := json.Marshal(map[string]any{"resources": resources})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(raw)
	name := names.Content(raw)
	c := &fleet.Content{ObjectMeta: metav1.ObjectMeta{Name: name}, Content: buf.Bytes(), SHA256Sum: hex.EncodeToString(sum[:])}
	if err := up.Create(ctx, c); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return name + ":" + hex.EncodeToString(sum[:4])
}

// newBundleDeployment creates a BundleDeployment of deploymentID into
// namespace downstream and waits until the agent's cache holds it.
func newBundleDeployment(ctx context.Context, t *testing.T, name, deploymentID, namespace string) *fleet.BundleDeployment {
	t.Helper()
	bd := &fleet.BundleDeployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: clusterNamespace, Name: name, Labels: map[string]string{
			fleet.BundleNameLabel: name, fleet.BundleNamespaceLabel: fleet.DefaultWorkspace,
		}},
		Spec: fleet.BundleDeploymentSpec{
			DeploymentID: deploymentID, StagedDeploymentID: deploymentID,
			Options: fleet.BundleDeploymentOptions{DefaultNamespace: namespace},
		},
	}
	if err := up.Create(ctx, bd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = client.IgnoreNotFound(up.Delete(context.Background(), bd)) })
	return bd
}

// reconciles is how many times the agent's BundleDeployment controller has
// reconciled, whatever the result, from controller-runtime's metrics.
func reconciles() (float64, error) {
	families, err := metrics.Registry.Gather()
	if err != nil {
		return 0, err
	}
	var n float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "bundledeployment" {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n, nil
}

// readKey reads a sealing key as agent/sealkey stores it.
func readKey(path string) (*ecdh.PrivateKey, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	return sealing.ParsePrivateKey(bytes.TrimSpace(b))
}
