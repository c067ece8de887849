package localcluster

import (
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/gitfleet/fleet/internal/kubeconfig"
)

// WorkloadBinaries are the binaries a control plane runs workloads with,
// beside kube-apiserver and etcd.
var WorkloadBinaries = []string{"kube-controller-manager", "kube-scheduler", "kwok"}

// FailImagePrefix starts the image of a container that the simulated nodes
// cannot run: a Deployment's pod with such an image stays Pending with its
// container waiting in ImagePullBackOff, and a Job's pod fails (see
// stages.yaml). There is no registry: a name is all a simulated node reads.
const FailImagePrefix = "fail.kwok.invalid/"

// KwokNodeAnnotation marks the Nodes the cluster's kwok simulates.
const KwokNodeAnnotation = "kwok.x-k8s.io/node"

//go:embed stages.yaml
var kwokStages []byte

// Workloads configure the processes that let a control plane run workloads:
// kube-controller-manager (Deployments, ReplicaSets, Jobs, garbage
// collection, service-account tokens), kube-scheduler, and kwok, which
// simulates Nodes and the lifecycle of the pods bound to them.
type Workloads struct {
	// Nodes is the number of simulated Nodes; 0 means 1.
	Nodes int
	// ControllersOnly runs kube-controller-manager alone: no scheduler, no
	// kwok, no Nodes. Pods stay unbound, and whatever plays their kubelet
	// reports their status (a test that runs a Deployment's pods as
	// processes of its own); an unbound pod is deleted at once.
	ControllersOnly bool
	// Controllers, when set, runs kube-controller-manager alone (as
	// ControllersOnly) with only these of its controllers, e.g.
	// TokenControllers: the least CPU for a test that needs just them.
	Controllers []string
}

// TokenControllers are the controllers of kube-controller-manager that fill
// Secrets of type kubernetes.io/service-account-token with the token of the
// ServiceAccount they name, as in any cluster.
var TokenControllers = []string{"serviceaccount-token-controller"}

// WorkloadProcess is one of the processes that run a control plane's
// workloads.
type WorkloadProcess struct {
	// Name is the binary's name.
	Name string
	// Log is the file that holds its output.
	Log  string
	cmd  *exec.Cmd
	done chan struct{}
}

// PID is the process ID.
func (p *WorkloadProcess) PID() int { return p.cmd.Process.Pid }

// stop asks the process to stop, and kills it after a grace period.
func (p *WorkloadProcess) stop() {
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func (p *WorkloadProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// WorkloadProcesses are the processes StartWorkloads started.
func (c *ControlPlane) WorkloadProcesses() []*WorkloadProcess { return c.workloads }

// StartWorkloads starts kube-controller-manager, kube-scheduler and kwok
// against the control plane, creates the simulated Nodes, and waits until
// they are Ready. Each process's log is kept in the control plane's
// directory (logs/). Stop stops them.
//
// The controller manager runs as system:kube-controller-manager and every
// controller in it with its own service account's token
// (--use-service-account-credentials), which it signs with the API
// server's service-account key; --root-ca-file gives pods the CA that
// signed the API server's certificate. The scheduler runs as
// system:kube-scheduler: both hold only the rights Kubernetes' bootstrap
// RBAC gives them. kwok plays every kubelet, and is admin.
//
// A control plane started with Options.Workloads also keeps the API
// server's ServiceAccount admission plugin, which envtest turns off: pods
// are given their ServiceAccount's token volume, and refused while the
// ServiceAccount does not exist yet, as in any cluster. StartWorkloads
// called later leaves the plugin as the API server was started.
func (c *ControlPlane) StartWorkloads(ctx context.Context, w Workloads) (err error) {
	if len(c.workloads) > 0 {
		return fmt.Errorf("control plane %s runs workloads already", c.Name)
	}
	if w.Nodes == 0 {
		w.Nodes = 1
	}
	if w.Nodes < 0 {
		return fmt.Errorf("workloads of %s: Nodes must be at least 1, not %d", c.Name, w.Nodes)
	}
	assets, err := Assets()
	if err != nil {
		return err
	}
	binaries := WorkloadBinaries
	if len(w.Controllers) > 0 {
		w.ControllersOnly, binaries = true, WorkloadBinaries[:1]
	}
	for _, b := range binaries {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			return fmt.Errorf("no %s in %s: run `make controlplane` (its cache now holds the binaries that run workloads too)", b, assets)
		}
	}
	logs := filepath.Join(c.dir, "logs")
	if err := os.MkdirAll(logs, 0o750); err != nil {
		return err
	}
	defer func() {
		if err != nil {
			c.stopWorkloads()
		}
	}()

	api := c.APIServer()
	caFile := filepath.Join(c.dir, "apiserver-ca.crt")
	if err := os.WriteFile(caFile, c.Config.CAData, 0o600); err != nil {
		return err
	}
	kcmKubeconfig, err := c.userKubeconfig("system:kube-controller-manager", nil)
	if err != nil {
		return err
	}
	schedKubeconfig, err := c.userKubeconfig("system:kube-scheduler", nil)
	if err != nil {
		return err
	}
	stages := filepath.Join(c.dir, "kwok-stages.yaml")
	if err := os.WriteFile(stages, kwokStages, 0o600); err != nil {
		return err
	}

	starts := []struct {
		name string
		args []string
	}{
		{"kube-controller-manager", []string{
			"--kubeconfig=" + kcmKubeconfig,
			"--use-service-account-credentials=true",
			"--service-account-private-key-file=" + filepath.Join(api.CertDir, "sa-signer.key"),
			"--root-ca-file=" + caFile,
			// One instance, started and stopped with its cluster.
			"--leader-elect=false",
			// No serving endpoint: nothing here scrapes metrics, and every
			// cluster of a test would need ports of its own.
			"--secure-port=0",
			// Every default controller but those for volumes, which the
			// simulated nodes cannot mount: they would only spend CPU.
			"--controllers=*,-persistentvolume-attach-detach-controller,-persistentvolume-binder-controller," +
				"-persistentvolume-expander-controller,-ephemeral-volume-controller," +
				"-persistentvolumeclaim-protection-controller,-persistentvolume-protection-controller",
		}},
		{"kube-scheduler", []string{
			"--kubeconfig=" + schedKubeconfig,
			"--authentication-kubeconfig=" + schedKubeconfig,
			"--authorization-kubeconfig=" + schedKubeconfig,
			"--leader-elect=false",
			"--secure-port=0",
		}},
		{"kwok", []string{
			"--kubeconfig=" + c.Kubeconfig,
			"--config=" + stages,
			"--manage-nodes-with-annotation-selector=" + KwokNodeAnnotation + "=fake",
			"--node-lease-duration-seconds=40",
		}},
	}
	if w.ControllersOnly {
		starts = starts[:1]
	}
	for i, a := range starts[0].args {
		if strings.HasPrefix(a, "--controllers=") && len(w.Controllers) > 0 {
			starts[0].args[i] = "--controllers=" + strings.Join(w.Controllers, ",")
		}
	}
	for _, s := range starts {
		p, err := c.startWorkloadProcess(assets, logs, s.name, s.args)
		if err != nil {
			return err
		}
		c.workloads = append(c.workloads, p)
	}
	if w.ControllersOnly {
		return nil
	}
	return c.createNodes(ctx, w.Nodes)
}

func (c *ControlPlane) startWorkloadProcess(assets, logs, name string, args []string) (*WorkloadProcess, error) {
	logPath := filepath.Join(logs, name+".log")
	f, err := os.Create(logPath) //nolint:gosec // G304: a log in this control plane's own directory.
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(filepath.Join(assets, name), args...) //nolint:gosec,noctx // G204: a control plane binary (WorkloadBinaries) from the assets directory; noctx: it lives as long as the control plane, which stops it.
	cmd.Stdout, cmd.Stderr = f, f
	// HOME: kwok reads ~/.kwok/kwok.yaml, which is not this cluster's.
	cmd.Env = append(os.Environ(), "HOME="+c.dir)
	if err := cmd.Start(); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("starting %s for %s: %w", name, c.Name, err)
	}
	p := &WorkloadProcess{Name: name, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = f.Close()
		close(p.done)
	}()
	return p, nil
}

// userKubeconfig writes a kubeconfig of a user the API server authenticates
// by a client certificate of its client CA.
func (c *ControlPlane) userKubeconfig(name string, groups []string) (string, error) {
	u, err := c.env.ControlPlane.AddUser(envtest.User{Name: name, Groups: groups}, c.Config)
	if err != nil {
		return "", fmt.Errorf("making a client certificate for %s on %s: %w", name, c.Name, err)
	}
	kc, err := kubeconfig.FromREST(u.Config(), c.Name)
	if err != nil {
		return "", err
	}
	path := filepath.Join(c.dir, name[len("system:"):]+".kubeconfig")
	return path, os.WriteFile(path, kc, 0o600)
}

// createNodes creates the simulated Nodes and waits until kwok reports them
// Ready, and until the namespace "default" has the ServiceAccount the
// controller manager creates (pods are refused without it).
func (c *ControlPlane) createNodes(ctx context.Context, n int) error {
	cl, err := c.Client(nil)
	if err != nil {
		return err
	}
	for i := range n {
		name := "kwok-node-" + strconv.Itoa(i)
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: map[string]string{KwokNodeAnnotation: "fake"},
			Labels:      map[string]string{"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "type": "kwok"},
		}}
		if err := cl.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("creating Node %s on %s: %w", name, c.Name, err)
		}
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, 90*time.Second, true, func(ctx context.Context) (bool, error) {
		for _, p := range c.workloads {
			if p.exited() {
				return false, fmt.Errorf("%s of %s exited; its log: %s", p.Name, c.Name, p.Log)
			}
		}
		nodes := &corev1.NodeList{}
		if err := cl.List(ctx, nodes, client.MatchingLabels{"type": "kwok"}); err != nil {
			last = err.Error()
			return false, nil //nolint:nilerr // kept in last for the timeout's error: the API server may not answer yet, poll again.
		}
		ready := 0
		for _, nd := range nodes.Items {
			for _, cond := range nd.Status.Conditions {
				if cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue {
					ready++
				}
			}
		}
		if ready < n {
			last = fmt.Sprintf("%d of %d Nodes Ready", ready, n)
			return false, nil
		}
		if err := cl.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &corev1.ServiceAccount{}); err != nil {
			last = "no ServiceAccount default/default yet: " + err.Error()
			return false, nil //nolint:nilerr // kept in last for the timeout's error: the controllers have not made it yet, poll again.
		}
		return true, nil
	})
	if err != nil {
		return fmt.Errorf("waiting for the simulated Nodes of %s (%s; logs in %s): %w", c.Name, last, filepath.Join(c.dir, "logs"), err)
	}
	return nil
}

// stopWorkloads stops the workload processes, the controller manager
// first so that it does not react to the others going away.
func (c *ControlPlane) stopWorkloads() {
	for _, p := range c.workloads {
		p.stop()
	}
	c.workloads = nil
}
