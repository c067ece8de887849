package devenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/agentmanifest"
	"github.com/gitfleet/fleet/internal/install"
	"github.com/gitfleet/fleet/internal/kubeconfig"
	"github.com/gitfleet/fleet/internal/localcluster"
	"github.com/gitfleet/fleet/internal/scheme"
)

// Options configure the environment.
type Options struct {
	// Dir holds kubeconfigs, logs, the examples repository and the state.
	Dir string
	// Bin holds the fleet, fleet-manager and fleet-agent binaries.
	Bin string
	// Examples is the directory committed into the demo's git repository.
	Examples string
	// Progress receives one line per step.
	Progress io.Writer
	// Workloads runs kube-controller-manager, kube-scheduler and kwok
	// beside the API servers of every cluster (the manager's own, edge-1,
	// capi-1), so that Deployments and Jobs run on simulated nodes, deploys
	// the examples' workloads directory (to fleet-local's quickstart too),
	// and has the manager keep an agent Bundle per cluster, as an install
	// does. Without it the clusters are API servers alone, that directory is
	// left out, and so are the agent Bundles (nothing would run their
	// Deployments).
	Workloads bool
	// Nodes is the number of simulated nodes per cluster when Workloads is
	// set; 0 means 1.
	Nodes int
	// NoManager leaves the manager out of Up: ServeManager (`fleet dev
	// manager`) runs it in the foreground, so that the Tilt loop restarts
	// it alone. Up needs NoAgents with it: the agents wait for what the
	// manager installs.
	NoManager bool
	// NoAgents leaves the agents out of Up, and so the wait for every
	// bundle to be Ready: ServeAgents (`fleet dev agents`) runs them in
	// the foreground.
	NoAgents bool
}

// WorkloadsDir is the examples' directory that needs clusters that run
// workloads.
const WorkloadsDir = "workloads"

// State is what `fleet dev down`, a second `fleet dev up` and the serve
// commands (`fleet dev manager`, `fleet dev agents`) need.
type State struct {
	// PIDs of every process started, the control planes' included.
	PIDs []int `json:"pids"`
	// Kubeconfigs by cluster name (manager, edge-1, capi-1).
	Kubeconfigs map[string]string `json:"kubeconfigs"`
	Logs        string            `json:"logs"`
	// TempDirs are the control planes' etcd data and certificates.
	TempDirs []string `json:"tempDirs"`
	// Workloads are the processes that run the clusters' workloads (their
	// PIDs are in PIDs too).
	Workloads []WorkloadProcess `json:"workloads,omitempty"`
	// RunsWorkloads is Options.Workloads of the Up that made the state:
	// the clusters run workloads, and the manager keeps agent Bundles.
	RunsWorkloads bool `json:"runsWorkloads,omitempty"`
	// EdgeRegistered is set once edge-1's agent-token and agent-config
	// manifests are applied: the agent registers with them once, and a
	// restarted agent resumes with the credential it stored.
	EdgeRegistered bool `json:"edgeRegistered,omitempty"`
	// DashboardURL opens the dashboard `fleet dashboard` serves with the
	// manager cluster's admin kubeconfig (its one-time secret included).
	DashboardURL string `json:"dashboardURL,omitempty"`
	Ready        bool   `json:"ready"`
}

// WorkloadProcess is one process that runs a cluster's workloads.
type WorkloadProcess struct {
	Cluster string `json:"cluster"`
	Name    string `json:"name"`
	PID     int    `json:"pid"`
	Log     string `json:"log"`
}

// Env is a running environment.
type Env struct {
	opts  Options
	State State
	// Manager and Clusters are the control planes Up started (nil in an
	// Env that Load read from the state).
	Manager  *localcluster.ControlPlane
	Clusters map[string]*localcluster.ControlPlane
	// Client is an admin client of the manager's cluster.
	Client client.Client
	procs  []*localcluster.Process
	// serving: processes die with this one and are not recorded in the
	// state (ServeManager, ServeAgents); otherwise they outlive it.
	serving bool
}

// stepf prints one step of the environment's progress, if it has a
// Progress writer.
func (e *Env) stepf(format string, args ...any) {
	if e.opts.Progress != nil {
		fmt.Fprintf(e.opts.Progress, "==> "+format+"\n", args...)
	}
}

// StatePath is where the state of an environment in dir is kept.
func StatePath(dir string) string { return filepath.Join(dir, "state.json") }

func (e *Env) save() error {
	b, err := json.MarshalIndent(e.State, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(StatePath(e.opts.Dir), b, 0o600)
}

// ReadState reads the state `fleet dev up` left in dir.
func ReadState(dir string) (*State, error) {
	b, err := os.ReadFile(StatePath(dir))
	if err != nil {
		return nil, err
	}
	st := &State{}
	if err := json.Unmarshal(b, st); err != nil {
		return nil, fmt.Errorf("reading %s: %w: run `fleet dev down --dir %s` and `fleet dev up` again", StatePath(dir), err, dir)
	}
	return st, nil
}

// Up brings everything up and, unless o.NoAgents, waits until every cluster
// and every example bundle are Ready. On error what was started is stopped.
func Up(ctx context.Context, o Options) (_ *Env, err error) {
	if o.NoManager && !o.NoAgents {
		return nil, errors.New("without the manager the agents cannot start (they wait for what it installs): " +
			"pass --no-agents as well and run `fleet dev agents` once `fleet dev manager` runs")
	}
	e := &Env{opts: o, Clusters: map[string]*localcluster.ControlPlane{},
		State: State{Kubeconfigs: map[string]string{}, Logs: filepath.Join(o.Dir, "logs"), RunsWorkloads: o.Workloads}}
	if err := os.MkdirAll(e.State.Logs, 0o750); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			e.Down()
		}
	}()
	phases := []func(context.Context) error{e.startControlPlanes, e.installLocalAgent}
	if !o.NoManager {
		phases = append(phases, e.startManager)
	}
	if !o.NoAgents {
		phases = append(phases, e.startLocalAgent, e.registerEdge, e.startEdgeAgent)
	}
	phases = append(phases, e.enrollCAPI)
	if !o.NoAgents {
		phases = append(phases, e.startCAPIAgent)
	}
	phases = append(phases, e.createGitRepos, e.startDashboard)
	if !o.NoAgents {
		phases = append(phases, e.waitReady)
	}
	for _, phase := range phases {
		if err := phase(ctx); err != nil {
			return nil, err
		}
		if err := e.save(); err != nil {
			return nil, err
		}
	}
	e.State.Ready = true
	if err := e.save(); err != nil {
		return nil, err
	}
	return e, nil
}

func (e *Env) startControlPlanes(context.Context) error {
	var workloads *localcluster.Workloads
	if e.opts.Workloads {
		workloads = &localcluster.Workloads{Nodes: e.opts.Nodes}
		e.stepf("Starting 3 control planes (kube-apiserver + etcd): manager, edge-1, capi-1; "+
			"each runs workloads (kube-controller-manager, kube-scheduler, kwok with %d simulated node(s))", max(e.opts.Nodes, 1))
	} else {
		e.stepf("Starting 3 control planes (kube-apiserver + etcd): manager, edge-1, capi-1")
	}
	type spec struct {
		name string
		opts localcluster.Options
	}
	specs := []spec{
		{"manager", localcluster.Options{CAPI: true, Workloads: workloads}},
		{"edge-1", localcluster.Options{NoCRDs: true, Workloads: workloads}},
		{"capi-1", localcluster.Options{NoCRDs: true, Workloads: workloads}},
	}
	errs := make(chan error, len(specs))
	cps := make([]*localcluster.ControlPlane, len(specs))
	for i, s := range specs {
		go func() {
			s.opts.Name, s.opts.Dir = s.name, filepath.Join(e.opts.Dir, s.name)
			var err error
			cps[i], err = localcluster.Start(s.opts)
			errs <- err
		}()
	}
	var first error
	for range specs {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	for i, cp := range cps {
		if cp == nil {
			continue
		}
		e.State.Kubeconfigs[specs[i].name] = cp.Kubeconfig
		e.State.PIDs = append(e.State.PIDs, cp.PIDs()...)
		e.State.TempDirs = append(e.State.TempDirs, cp.TempDirs()...)
		for _, p := range cp.WorkloadProcesses() {
			e.State.Workloads = append(e.State.Workloads, WorkloadProcess{Cluster: specs[i].name, Name: p.Name, PID: p.PID(), Log: p.Log})
		}
		if i == 0 {
			e.Manager = cp
		} else {
			e.Clusters[specs[i].name] = cp
		}
	}
	if first != nil {
		return first
	}
	// The CA agents trust the manager's API server with.
	if err := os.WriteFile(e.managerCAFile(), e.Manager.Config.CAData, 0o600); err != nil {
		return err
	}
	var err error
	e.Client, err = e.Manager.Client(scheme.New())
	return err
}

// installLocalAgent makes in the manager's own cluster what installing the
// manager (`fleet install controller`, the fleet chart) makes there for the
// local cluster's agent, and the manager may not make itself: its namespace
// and its ServiceAccount bound to cluster-admin. The agent Deployment the
// manager installs there runs its pods as that ServiceAccount; without it
// they are refused, and the local cluster's agent Bundle is never Ready.
func (e *Env) installLocalAgent(ctx context.Context) error {
	ns := fleet.DefaultSystemNamespace
	e.stepf("Installing what the local cluster's agent needs in the manager's cluster, as an install does: namespace %s, ServiceAccount %s bound to cluster-admin", ns, fleet.AgentName)
	objs := append([]client.Object{&corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: ns}}}, install.LocalAgentObjects(ns)...)
	manifest, err := agentmanifest.YAML(objs)
	if err != nil {
		return err
	}
	return localcluster.ApplyYAML(ctx, e.Client, manifest)
}

func (e *Env) managerCAFile() string { return filepath.Join(e.opts.Dir, "manager", "ca.crt") }

// start runs one of the binaries in Options.Bin with its log in the logs
// directory: in a session of its own, recorded in the state, so that it
// outlives `fleet dev up`; or, when serving, tied to this process.
func (e *Env) start(name, binary string, args ...string) (*localcluster.Process, error) {
	path := filepath.Join(e.opts.Bin, binary)
	var p *localcluster.Process
	var err error
	if e.serving {
		p, err = localcluster.StartFile(e.State.Logs, name, path, nil, args...)
	} else {
		p, err = localcluster.StartPath(e.State.Logs, name, path, args...)
	}
	if err != nil {
		return nil, fmt.Errorf("starting %s (%s): %w: run `make build` or pass --bin", name, path, err)
	}
	e.procs = append(e.procs, p)
	if !e.serving {
		e.State.PIDs = append(e.State.PIDs, p.PID())
	}
	return p, nil
}

// managerArgs are fleet-manager's flags in the local environment, with its
// health probes on probe.
func (e *Env) managerArgs(probe string) ([]string, error) {
	kc := e.State.Kubeconfigs["manager"]
	cfg, err := restConfig(kc)
	if err != nil {
		return nil, err
	}
	args := []string{"--kubeconfig", kc,
		"--api-server-url", cfg.Host, "--api-server-ca-file", e.managerCAFile(),
		"--webhook-bind-address", "", "--metrics-bind-address", "0", "--health-probe-bind-address", probe,
		// The demo's repository is a local directory.
		"--allow-local-repos",
		// The demo serves git and charts on loopback.
		"--egress-allow-cidrs", "127.0.0.0/8,::1/128",
		// Its own git cache: a later demo makes a new repository at the
		// same path, which a clone cached from this one does not fit.
		"--git-cache-dir", filepath.Join(e.opts.Dir, "git-cache")}
	if !e.State.RunsWorkloads {
		// Clusters that run no workloads never run an agent Bundle's
		// Deployment, which would never be Ready. An install keeps agent
		// Bundles (the flag's default), and so does the environment whose
		// clusters run workloads.
		args = append(args, "--agent-bundles=false")
	}
	return args, nil
}

func (e *Env) startManager(ctx context.Context) error {
	e.stepf("Starting fleet-manager (log: %s)", filepath.Join(e.State.Logs, "fleet-manager.log"))
	probe, err := localcluster.FreeAddr()
	if err != nil {
		return err
	}
	args, err := e.managerArgs(probe)
	if err != nil {
		return err
	}
	p, err := e.start("fleet-manager", "fleet-manager", args...)
	if err != nil {
		return err
	}
	// Registration needs the namespaces the manager creates before it is ready.
	return p.WaitReady(ctx, "http://"+probe+"/readyz", localcluster.DefaultReadyTimeout)
}

// startDashboard serves the dashboard on loopback with the manager
// cluster's admin kubeconfig (`fleet dashboard`), and keeps its URL.
func (e *Env) startDashboard(ctx context.Context) error {
	urlFile := filepath.Join(e.opts.Dir, "dashboard-url")
	_ = os.Remove(urlFile)
	e.stepf("Starting the dashboard (log: %s)", filepath.Join(e.State.Logs, "dashboard.log"))
	if _, err := e.start("dashboard", "fleet", "dashboard", "--kubeconfig", e.State.Kubeconfigs["manager"],
		"--url-file", urlFile); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if b, err := os.ReadFile(urlFile); err == nil && len(b) > 0 { //nolint:gosec // G304: a file of the environment's own directory
			e.State.DashboardURL = strings.TrimSpace(string(b))
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the dashboard did not start in a minute (log: %s)", filepath.Join(e.State.Logs, "dashboard.log"))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// clusterClient is an admin client of the named cluster (nil scheme:
// client-go's).
func (e *Env) clusterClient(name string) (client.Client, error) {
	cfg, err := restConfig(e.State.Kubeconfigs[name])
	if err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{})
}

func restConfig(path string) (*rest.Config, error) {
	raw, err := os.ReadFile(path) //nolint:gosec // G304: a kubeconfig this environment wrote into its own directory.
	if err != nil {
		return nil, err
	}
	return kubeconfig.ToREST(raw)
}

// registerEdge does what a person does for an edge cluster: print the
// agent-token and agent-config manifests and apply them.
func (e *Env) registerEdge(ctx context.Context) error {
	e.stepf("Registering edge-1 by token: fleet install agent-token | apply; fleet install agent-config -l env=edge | apply")
	local, err := e.clusterClient("edge-1")
	if err != nil {
		return err
	}
	fleetBin := filepath.Join(e.opts.Bin, "fleet")
	for _, args := range [][]string{
		{"install", "agent-config", "-l", "env=edge"},
		{"install", "agent-token", "-k", e.State.Kubeconfigs["manager"]},
	} {
		out, err := exec.CommandContext(ctx, fleetBin, args...).Output() //nolint:gosec // G204: the project's own fleet binary, from Options.Bin.
		if err != nil {
			return fmt.Errorf("fleet %v: %w", args, stderrOf(err))
		}
		if err := localcluster.ApplyYAML(ctx, local, out); err != nil {
			return err
		}
	}
	e.State.EdgeRegistered = true
	return nil
}

// startEdgeAgent runs edge-1's agent, standing in for the kubelet that
// would run the Deployment the agent-token manifest holds.
func (e *Env) startEdgeAgent(context.Context) error {
	_, err := e.start("agent-edge-1", "fleet-agent", "--kubeconfig", e.State.Kubeconfigs["edge-1"], "--namespace", fleet.DefaultSystemNamespace)
	return err
}

// enrollCAPI writes what Cluster API writes for a new cluster: the Cluster,
// its kubeconfig Secret, and, once "provisioned", controlPlaneInitialized.
// The manager installs the agent into capi-1 (startCAPIAgent runs it).
func (e *Env) enrollCAPI(ctx context.Context) error {
	e.stepf("Enrolling capi-1 through Cluster API: Cluster object + capi-1-kubeconfig Secret")
	kc, err := os.ReadFile(e.State.Kubeconfigs["capi-1"])
	if err != nil {
		return err
	}
	capi := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "cluster.x-k8s.io/v1beta2", "kind": "Cluster",
		"metadata": map[string]interface{}{"name": "capi-1", "namespace": fleet.DefaultWorkspace, "labels": map[string]interface{}{"env": "capi"}},
		"spec":     map[string]interface{}{"paused": false},
	}}
	if err := e.Client.Create(ctx, capi); err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "capi-1-kubeconfig", Namespace: fleet.DefaultWorkspace,
			Labels: map[string]string{"cluster.x-k8s.io/cluster-name": "capi-1"}},
		Type: "cluster.x-k8s.io/secret",
		Data: map[string][]byte{"value": kc},
	}
	if err := e.Client.Create(ctx, secret); err != nil {
		return err
	}
	// The control plane comes up: Cluster API says so in status (a patch,
	// as the manager may have added its finalizer meanwhile).
	initialized := []byte(`{"status":{"initialization":{"controlPlaneInitialized":true}}}`)
	return e.Client.Status().Patch(ctx, capi, client.RawPatch(types.MergePatchType, initialized))
}

// startCAPIAgent runs the agent the manager installs into capi-1.
func (e *Env) startCAPIAgent(ctx context.Context) error {
	e.stepf("Waiting for the manager to install the agent into capi-1")
	return e.startInstalledAgent(ctx, "capi-1", "capi-1")
}

// startLocalAgent runs the agent the manager installs into its own cluster
// for the Cluster fleet-local/local, as Fleet does for the cluster it runs
// in.
func (e *Env) startLocalAgent(ctx context.Context) error {
	e.stepf("Waiting for the manager to install the local cluster's agent into its own cluster (Cluster fleet-local/local)")
	return e.startInstalledAgent(ctx, "manager", "local")
}

// startInstalledAgent waits for the agent Deployment the manager installs
// into the cluster and runs the agent from the objects it finds there,
// standing in for the kubelet.
func (e *Env) startInstalledAgent(ctx context.Context, cluster, name string) error {
	local, err := e.clusterClient(cluster)
	if err != nil {
		return err
	}
	var agentNS string
	if err := poll(ctx, 2*time.Minute, func() (bool, error) {
		deps := &appsv1.DeploymentList{}
		if err := local.List(ctx, deps, client.MatchingLabels{"app": fleet.AgentName}); err != nil {
			return false, nil //nolint:nilerr // the cluster may not answer yet: poll again until the timeout.
		}
		for _, d := range deps.Items {
			agentNS = d.Namespace
			return true, nil
		}
		return false, nil
	}); err != nil {
		return fmt.Errorf("the manager did not install the agent into %s: %w (is the manager running? see %s)",
			name, err, filepath.Join(e.State.Logs, "fleet-manager.log"))
	}
	_, err = e.start("agent-"+name, "fleet-agent", "--kubeconfig", e.State.Kubeconfigs[cluster], "--namespace", agentNS)
	return err
}

// LocalGitRepo is the GitRepo the demo makes in fleet-local: no targets, so
// it lands on the manager's own cluster through the default ClusterGroup,
// as in Fleet's quickstart.
const LocalGitRepo = "quickstart"

// localPaths are the examples' directories of LocalGitRepo: plain
// manifests, and a Deployment and a Job (WorkloadsDir) when the clusters run
// workloads.
func (e *Env) localPaths() []string {
	if e.opts.Workloads {
		return []string{"plain", WorkloadsDir}
	}
	return []string{"plain"}
}

func (e *Env) createGitRepos(ctx context.Context) error {
	e.stepf("Creating a git repository from %s, a GitRepo in %s pointing at it for every cluster there, and one in %s without targets",
		e.opts.Examples, fleet.DefaultWorkspace, fleet.LocalWorkspace)
	repo := filepath.Join(e.opts.Dir, "examples.git")
	if err := CommitTree(e.opts.Examples, repo); err != nil {
		return err
	}
	poll := &metav1.Duration{Duration: 5 * time.Second}
	paths, err := e.examplePaths()
	if err != nil {
		return err
	}
	if err := e.Client.Create(ctx, &fleet.GitRepo{
		ObjectMeta: metav1.ObjectMeta{Name: "examples", Namespace: fleet.DefaultWorkspace},
		Spec: fleet.GitRepoSpec{Repo: repo, Branch: "main", PollingInterval: poll, Paths: paths,
			Targets: []fleet.GitTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{}}}},
	}); err != nil {
		return err
	}
	return e.Client.Create(ctx, &fleet.GitRepo{
		ObjectMeta: metav1.ObjectMeta{Name: LocalGitRepo, Namespace: fleet.LocalWorkspace},
		Spec:       fleet.GitRepoSpec{Repo: repo, Branch: "main", PollingInterval: poll, Paths: e.localPaths()},
	})
}

// examplePaths are the examples' directories the GitRepo deploys, one
// bundle each: every one, less WorkloadsDir when the clusters do not run
// workloads.
func (e *Env) examplePaths() ([]string, error) {
	entries, err := os.ReadDir(e.opts.Examples)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, d := range entries {
		if !d.IsDir() || strings.HasPrefix(d.Name(), ".") || (d.Name() == WorkloadsDir && !e.opts.Workloads) {
			continue
		}
		paths = append(paths, d.Name())
	}
	if len(paths) == 0 {
		return nil, fmt.Errorf("no example directories in %s", e.opts.Examples)
	}
	return paths, nil
}

func (e *Env) waitReady(ctx context.Context) error {
	e.stepf("Waiting until every cluster and every bundle are Ready")
	paths, err := e.examplePaths()
	if err != nil {
		return err
	}
	last := ""
	return poll(ctx, 3*time.Minute, func() (bool, error) {
		clusters, bundles, err := e.Status(ctx)
		if err != nil {
			return false, nil //nolint:nilerr // a cluster may not answer yet: poll again until the timeout.
		}
		// local, edge-1 and capi-1; the examples, the quickstart's and,
		// when the manager keeps them, one agent Bundle per cluster.
		want := len(paths) + len(e.localPaths())
		if e.State.RunsWorkloads {
			want += len(clusters)
		}
		ready := len(clusters) == 3 && len(bundles) == want
		for _, c := range clusters {
			ready = ready && c.Ready
		}
		for _, b := range bundles {
			ready = ready && b.Ready
		}
		if line := Summary(clusters, bundles); line != last {
			e.stepf("%s", line)
			last = line
		}
		return ready, nil
	})
}

// ClusterRow and BundleRow are what the demo's table shows.
type ClusterRow struct {
	Workspace, Name, Labels, State, Bundles string
	Ready                                   bool
}

// BundleRow is one bundle's line.
type BundleRow struct {
	Workspace, Name, Clusters, State string
	Ready                            bool
}

// Workspaces are the namespaces the demo shows: the local cluster's and
// the default one.
func Workspaces() []string { return []string{fleet.LocalWorkspace, fleet.DefaultWorkspace} }

// Status reads the clusters and bundles from the manager's API server.
func (e *Env) Status(ctx context.Context) ([]ClusterRow, []BundleRow, error) {
	return ReadStatus(ctx, e.Client)
}

// ReadStatus reads clusters and bundles of the demo's Workspaces.
func ReadStatus(ctx context.Context, c client.Client) ([]ClusterRow, []BundleRow, error) {
	var cr []ClusterRow
	var br []BundleRow
	for _, ws := range Workspaces() {
		clusters := &fleet.ClusterList{}
		if err := c.List(ctx, clusters, client.InNamespace(ws)); err != nil {
			return nil, nil, err
		}
		bundles := &fleet.BundleList{}
		if err := c.List(ctx, bundles, client.InNamespace(ws)); err != nil {
			return nil, nil, err
		}
		for _, cl := range clusters.Items {
			// Ready once its status sums every BundleDeployment of its
			// namespace: the summary is written a few seconds after they
			// change, and a Ready cluster showing 0/0 is not up yet.
			deployed := &fleet.BundleDeploymentList{}
			if ns := cl.Status.Namespace; ns != "" {
				if err := c.List(ctx, deployed, client.InNamespace(ns)); err != nil {
					return nil, nil, err
				}
			}
			counted := cl.Status.Summary.DesiredReady == len(deployed.Items)
			cr = append(cr, ClusterRow{Workspace: ws, Name: cl.Name, Labels: labelString(cl.Labels), State: cl.Status.Display.State,
				Bundles: cl.Status.Display.ReadyBundles, Ready: counted && meta.IsStatusConditionTrue(cl.Status.Conditions, fleet.ConditionReady)})
		}
		for _, b := range bundles.Items {
			br = append(br, BundleRow{Workspace: ws, Name: b.Name, Clusters: b.Status.Display.ReadyClusters, State: b.Status.Display.State,
				Ready: meta.IsStatusConditionTrue(b.Status.Conditions, fleet.ConditionReady) && b.Status.Summary.DesiredReady > 0})
		}
	}
	return cr, br, nil
}

// Summary is a one-line progress report.
func Summary(clusters []ClusterRow, bundles []BundleRow) string {
	rc, rb := 0, 0
	var waiting []string
	for _, c := range clusters {
		if c.Ready {
			rc++
		} else {
			waiting = append(waiting, fmt.Sprintf("cluster %s %s", c.Name, c.State))
		}
	}
	for _, b := range bundles {
		if b.Ready {
			rb++
		} else {
			waiting = append(waiting, fmt.Sprintf("bundle %s %s %s", b.Name, b.Clusters, b.State))
		}
	}
	line := fmt.Sprintf("clusters ready %d/%d, bundles ready %d/%d", rc, len(clusters), rb, len(bundles))
	if len(waiting) > 0 {
		line += " (waiting: " + strings.Join(waiting, "; ") + ")"
	}
	return line
}

// Down stops every process of the environment that this process started.
func (e *Env) Down() {
	for _, p := range e.procs {
		p.Stop()
	}
	if e.Manager != nil {
		_ = e.Manager.Stop()
	}
	for _, cp := range e.Clusters {
		_ = cp.Stop()
	}
}

// Kill stops the processes recorded in a state file (SIGTERM, then SIGKILL).
func Kill(pids []int) {
	for _, pid := range pids {
		_ = syscall.Kill(pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, pid := range pids {
		for syscall.Kill(pid, 0) == nil && time.Now().Before(deadline) {
			time.Sleep(100 * time.Millisecond)
		}
		_ = syscall.Kill(pid, syscall.SIGKILL)
	}
}

func poll(ctx context.Context, timeout time.Duration, cond func() (bool, error)) error {
	return wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, timeout, true, func(context.Context) (bool, error) { return cond() })
}

func stderrOf(err error) error {
	if ee, ok := err.(*exec.ExitError); ok && len(ee.Stderr) > 0 {
		return fmt.Errorf("%v: %s", err, ee.Stderr)
	}
	return err
}

func labelString(l map[string]string) string {
	keys := make([]string, 0, len(l))
	for k := range l {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = k + "=" + l[k]
	}
	return strings.Join(parts, ",")
}
