package localcluster

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gitfleet/fleet/config/crd"
	"github.com/gitfleet/fleet/internal/kubeconfig"
)

// AssetsEnv names the directory holding kube-apiserver and etcd; it wins over
// the cache. KUBEBUILDER_ASSETS is honoured as well, as envtest does.
const AssetsEnv = "FLEET_CONTROLPLANE_ASSETS"

//go:embed capi/*.yaml
var capiCRDs embed.FS

// Options configure one control plane.
type Options struct {
	// Name labels the control plane in its kubeconfig and in errors.
	Name string
	// Dir receives the kubeconfig (Dir/kubeconfig) and, when set, stays after
	// Stop. Empty means a temporary directory removed by Stop.
	Dir string
	// CAPI also installs Cluster API's Cluster CRD.
	CAPI bool
	// NoCRDs skips the fleet CRDs (for a bare downstream cluster).
	NoCRDs bool
	// APIServerArgs are extra kube-apiserver flags, name to values.
	APIServerArgs map[string][]string
	// StartTimeout bounds the start; default 90s (the machine may be busy).
	StartTimeout time.Duration
	// Workloads, when set, also runs kube-controller-manager,
	// kube-scheduler and kwok with simulated Nodes (see StartWorkloads), so
	// that Deployments, Jobs and their pods progress as in a cluster.
	// Without it nothing runs what the API server stores.
	Workloads *Workloads
}

// ControlPlane is one running kube-apiserver with its etcd.
type ControlPlane struct {
	Name string
	// Config is an admin (system:masters) REST config.
	Config *rest.Config
	// Kubeconfig is the path of an admin kubeconfig file.
	Kubeconfig string

	env       *envtest.Environment
	dir       string
	tempDir   bool
	workloads []*WorkloadProcess
}

var assetsOnce struct {
	sync.Mutex
	dir string
}

// Assets returns the directory holding kube-apiserver and etcd, building them
// first when they are not cached yet.
func Assets() (string, error) {
	assetsOnce.Lock()
	defer assetsOnce.Unlock()
	if assetsOnce.dir != "" {
		return assetsOnce.dir, nil
	}
	for _, env := range []string{AssetsEnv, "KUBEBUILDER_ASSETS"} {
		if d := os.Getenv(env); d != "" {
			if err := hasBinaries(d); err != nil {
				return "", fmt.Errorf("%s=%s: %w", env, d, err)
			}
			assetsOnce.dir = d
			return d, nil
		}
	}
	script, err := buildScript()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("bash", script) //nolint:gosec,noctx // G204: the project's own script that builds the control plane binaries; noctx: Assets takes no context, the build runs once to its end for every caller waiting on the lock.
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("building the control plane binaries with %s failed (run `make controlplane` to see why): %w", script, err)
	}
	d := strings.TrimSpace(string(out))
	if err := hasBinaries(d); err != nil {
		return "", err
	}
	assetsOnce.dir = d
	return d, nil
}

func hasBinaries(dir string) error {
	for _, b := range []string{"kube-apiserver", "etcd"} {
		if _, err := os.Stat(filepath.Join(dir, b)); err != nil { //nolint:gosec // G703: dir is the assets directory the user chose (AssetsEnv) or the build made.
			return fmt.Errorf("no %s in %s: run `make controlplane`", b, dir)
		}
	}
	return nil
}

// buildScript finds test/controlplane/tools/build.sh (the tools module that
// pins the binaries' versions) in the repository of this source file, or
// below the current directory's repository root.
func buildScript() (string, error) {
	if _, file, _, ok := runtime.Caller(0); ok {
		p := filepath.Join(filepath.Dir(file), "..", "..", "test", "controlplane", "tools", "build.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		p := filepath.Join(dir, "test", "controlplane", "tools", "build.sh")
		if _, err := os.Stat(p); err == nil {
			return p, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find test/controlplane/tools/build.sh: set " + AssetsEnv + " to a directory with kube-apiserver and etcd")
		}
		dir = parent
	}
}

// CAPICRDs returns Cluster API's CRDs that the manager reads.
func CAPICRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	entries, err := capiCRDs.ReadDir("capi")
	if err != nil {
		return nil, err
	}
	var docs [][]byte
	for _, e := range entries {
		b, err := capiCRDs.ReadFile("capi/" + e.Name())
		if err != nil {
			return nil, err
		}
		docs = append(docs, b)
	}
	return crd.Decode(docs)
}

// Start runs a new control plane and waits until it serves.
func Start(opts Options) (*ControlPlane, error) {
	if opts.Name == "" {
		opts.Name = "cluster"
	}
	assets, err := Assets()
	if err != nil {
		return nil, err
	}
	cp := &ControlPlane{Name: opts.Name, dir: opts.Dir}
	if cp.dir == "" {
		cp.dir, err = os.MkdirTemp("", "fleet-cp-"+opts.Name+"-")
		if err != nil {
			return nil, err
		}
		cp.tempDir = true
	} else if err := os.MkdirAll(cp.dir, 0o750); err != nil {
		return nil, err
	}

	var crds []*apiextensionsv1.CustomResourceDefinition
	if !opts.NoCRDs {
		if crds, err = crd.CRDs(); err != nil {
			return nil, err
		}
	}
	if opts.CAPI {
		capi, err := CAPICRDs()
		if err != nil {
			return nil, err
		}
		crds = append(crds, capi...)
	}
	timeout := opts.StartTimeout
	if timeout == 0 {
		timeout = 90 * time.Second
	}
	cp.env = &envtest.Environment{
		BinaryAssetsDirectory:    assets,
		CRDs:                     crds,
		ErrorIfCRDPathMissing:    true,
		ControlPlaneStartTimeout: timeout,
		ControlPlaneStopTimeout:  30 * time.Second,
		// envtest waits 10s by default for the CRDs to be served; a
		// machine starting several control planes at once (make test runs
		// two suites side by side, each with two or more) can take longer
		// to publish forty of them in discovery.
		CRDInstallOptions: envtest.CRDInstallOptions{MaxTime: timeout},
	}
	// etcd keeps its data in a directory of ours, so RestartEtcd finds it.
	cp.env.ControlPlane.Etcd = &envtest.Etcd{DataDir: filepath.Join(cp.dir, "etcd")}
	if err := os.MkdirAll(cp.env.ControlPlane.Etcd.DataDir, 0o700); err != nil {
		return nil, err
	}
	apiServer := cp.env.ControlPlane.GetAPIServer()
	if opts.Workloads != nil {
		// envtest turns the ServiceAccount admission plugin off, as nothing
		// would create the ServiceAccounts it requires; the controller
		// manager does, so pods get theirs as in any cluster.
		apiServer.Configure().Disable("disable-admission-plugins")
	}
	for k, v := range opts.APIServerArgs {
		apiServer.Configure().Set(k, v...)
	}
	cfg, err := cp.env.Start()
	if err != nil {
		cp.cleanup()
		return nil, fmt.Errorf("starting control plane %q: %w", opts.Name, err)
	}
	cfg.QPS, cfg.Burst = 200, 400
	cp.Config = cfg
	kc, err := kubeconfig.FromREST(cfg, opts.Name)
	if err == nil {
		cp.Kubeconfig = filepath.Join(cp.dir, "kubeconfig")
		err = os.WriteFile(cp.Kubeconfig, kc, 0o600)
	}
	if err == nil && opts.Workloads != nil {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		err = cp.StartWorkloads(ctx, *opts.Workloads)
		cancel()
	}
	if err != nil {
		_ = cp.Stop()
		return nil, err
	}
	return cp, nil
}

// StartN starts n control planes at once; names are prefix-0, prefix-1, ...
// On error every control plane already started is stopped.
func StartN(n int, prefix string, opts Options) ([]*ControlPlane, error) {
	cps := make([]*ControlPlane, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o := opts
			o.Name = fmt.Sprintf("%s-%d", prefix, i)
			if opts.Dir != "" {
				o.Dir = filepath.Join(opts.Dir, o.Name)
			}
			cps[i], errs[i] = Start(o)
		}()
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for _, cp := range cps {
			if cp != nil {
				_ = cp.Stop()
			}
		}
		return nil, err
	}
	return cps, nil
}

// Client returns an admin client with the given scheme (nil: client-go's).
func (c *ControlPlane) Client(scheme *apiruntime.Scheme) (client.Client, error) {
	return client.New(c.Config, client.Options{Scheme: scheme})
}

// KubeSystemUID returns the UID of the kube-system namespace: the identity of a
// cluster, as the agent reports it.
func (c *ControlPlane) KubeSystemUID(ctx context.Context) (types.UID, error) {
	cl, err := c.Client(nil)
	if err != nil {
		return "", err
	}
	ns := &corev1.Namespace{}
	if err := cl.Get(ctx, client.ObjectKey{Name: "kube-system"}, ns); err != nil {
		return "", err
	}
	return ns.UID, nil
}

// APIServer exposes the kube-apiserver process so fault tests can stop and
// restart it while etcd keeps its data.
func (c *ControlPlane) APIServer() *envtest.APIServer {
	return c.env.ControlPlane.GetAPIServer()
}

// Stop stops the workload processes, if any, then the API server and etcd,
// and removes temporary files.
func (c *ControlPlane) Stop() error {
	if c == nil || c.env == nil {
		return nil
	}
	c.stopWorkloads()
	err := c.env.Stop()
	c.cleanup()
	return err
}

func (c *ControlPlane) cleanup() {
	if c.tempDir {
		_ = os.RemoveAll(c.dir)
		return
	}
	_ = os.RemoveAll(filepath.Join(c.dir, "etcd"))
}

// RestartAPIServer stops the kube-apiserver, keeps it down until down has
// passed, and starts it again (see StopAPIServer).
func (c *ControlPlane) RestartAPIServer(down time.Duration) error {
	start := time.Now()
	if err := c.StopAPIServer(); err != nil {
		return err
	}
	time.Sleep(down - time.Since(start)) // the outage itself
	return c.StartAPIServer()
}

// StopAPIServer stops the kube-apiserver so that StartAPIServer can start it
// again on the same address with the same certificates and service account
// keys, and every client's credentials stay valid. envtest removes the
// certificate directory it generated on Stop and would make a new CA on
// Start: a copy of the directory keeps the identity.
func (c *ControlPlane) StopAPIServer() error {
	api := c.APIServer()
	certs, err := os.MkdirTemp(c.dir, "apiserver-certs-")
	if err != nil {
		return err
	}
	if err := copyDir(api.CertDir, certs); err != nil {
		return fmt.Errorf("keeping the API server's certificates: %w", err)
	}
	if err := api.Stop(); err != nil && !strings.Contains(err.Error(), "timeout waiting for process kube-apiserver to stop") {
		// kube-apiserver drains its watches for longer than envtest waits;
		// envtest then kills it, which is an outage all the same.
		return fmt.Errorf("stopping the API server of %s: %w", c.Name, err)
	}
	api.CertDir = certs
	return nil
}

// StartAPIServer starts the kube-apiserver StopAPIServer stopped and waits
// until it serves.
func (c *ControlPlane) StartAPIServer() error {
	return c.APIServer().Start()
}

// RestartEtcd stops etcd, keeps it down until down has passed, and starts it
// again (see StopEtcd).
func (c *ControlPlane) RestartEtcd(down time.Duration) error {
	start := time.Now()
	if err := c.StopEtcd(); err != nil {
		return err
	}
	time.Sleep(down - time.Since(start)) // the outage itself
	return c.StartEtcd()
}

// StopEtcd stops etcd; StartEtcd starts it again on the same address with
// the same data.
func (c *ControlPlane) StopEtcd() error {
	if err := c.env.ControlPlane.Etcd.Stop(); err != nil {
		return fmt.Errorf("stopping etcd of %s: %w", c.Name, err)
	}
	return nil
}

// StartEtcd starts the etcd StopEtcd stopped and waits until it serves.
func (c *ControlPlane) StartEtcd() error {
	return c.env.ControlPlane.Etcd.Start()
}

func copyDir(from, to string) error {
	entries, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		data, err := os.ReadFile(filepath.Join(from, e.Name())) //nolint:gosec // G304: a file of a control plane directory this package made.
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(to, e.Name()), data, 0o600); err != nil { //nolint:gosec // G703: to is a control plane directory this package made; the name is one from ReadDir.
			return err
		}
	}
	return nil
}

// PIDs are the process IDs of this control plane's kube-apiserver and etcd,
// found by the directories only they were started with, and of its workload
// processes.
func (c *ControlPlane) PIDs() []int {
	marks := c.TempDirs()
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, p := range c.workloads {
		pids = append(pids, p.PID())
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		if slices.Contains(pids, pid) {
			continue
		}
		for _, m := range marks {
			if m != "" && strings.Contains(string(cmdline), m) {
				pids = append(pids, pid)
				break
			}
		}
	}
	return pids
}

// TempDirs are the directories envtest made for etcd's data and the API
// server's certificates; Stop removes them, a process kill does not.
func (c *ControlPlane) TempDirs() []string {
	cp := &c.env.ControlPlane
	var dirs []string
	if cp.Etcd != nil {
		dirs = append(dirs, cp.Etcd.DataDir)
	}
	if cp.APIServer != nil {
		dirs = append(dirs, cp.APIServer.CertDir)
	}
	return dirs
}
