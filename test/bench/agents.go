package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework"
	"github.com/gitfleet/fleet/test/simagent"
)

// fleetRun is a manager process with simulated agents on one control plane.
type fleetRun struct {
	cp     *controlplane.ControlPlane
	c      client.Client
	mgr    *manager
	agents []*simagent.Agent
	n, b   int
	// floor is the cr-floor rate measured on this API server (0: not
	// measured).
	floor float64
	// floorResult is the cr-floor experiment's result (zero: not run).
	floorResult Result
	// events counts the manager's BundleDeployment writes (watchBDs; nil
	// until Retarget starts it).
	events *bdEvents
	// seen counts the BundleDeployments the agents have seen (FanoutReady).
	seen    atomic.Int64
	results []Result
	// started is the usage when the running experiment started.
	started usage
	// metricsBefore is fleet_metrics_update_seconds_total then.
	metricsBefore float64
	// audit is the API server's audit log of writes (nil without), and
	// auditFrom where the running experiment's part of it starts.
	audit     *auditLog
	auditFrom int64
	// prof is the API server's CPU profile of the running experiment, and
	// self this process's (the simulated agents' CPU).
	prof *apiProfiler
	self *selfProfiler
	// progress prints interim figures while the run goes on (nil: none).
	progress *progress
}

// finishProfiles ends the profiles markProfiled started, recording them in
// r (nil: only ends them).
func (f *fleetRun) finishProfiles(r *Result) {
	f.self.finish(r)
	f.self = nil
	if r == nil {
		r = &Result{}
	}
	finishProfile(f.prof, r)
}

// mark notes the API server's counters and CPU at an experiment's start.
func (f *fleetRun) mark(ctx context.Context) {
	f.started = takeUsage(ctx, f.cp)
	f.metricsBefore = f.mgr.metricsUpdateSeconds()
	f.auditFrom = f.audit.offset()
}

// markProfiled also starts the API server's CPU profile (one at a time:
// finishProfile ends it).
func (f *fleetRun) markProfiled(ctx context.Context) {
	f.mark(ctx)
	f.prof = startAPIProfile(ctx, f.cp.Config)
	f.self = startSelfProfile()
}

// kinds tells the agents' cluster namespaces and workspaces apart.
func (f *fleetRun) kinds() namespaceKinds {
	k := namespaceKinds{cluster: map[string]bool{}, workspace: map[string]bool{fleet.DefaultWorkspace: true}}
	for _, a := range f.agents {
		k.cluster[a.Cred.ClusterNamespace] = true
		k.workspace[a.Cred.Namespace] = true
	}
	return k
}

// audited counts the writes in the audit log since mark, until end; ok is
// false without an audit log (the reason is then in r's note).
func (f *fleetRun) audited(end time.Time, r *Result) (auditCounts, bool) {
	if f.audit == nil {
		return auditCounts{}, false
	}
	c, err := f.audit.count(f.auditFrom, end, f.kinds())
	if err != nil {
		r.Note = strings.TrimPrefix(r.Note+"; reading the audit log: "+err.Error(), "; ")
		return auditCounts{}, false
	}
	r.AuditWrites = c.text()
	return c, true
}

// bdEvents counts BundleDeployment writes seen through a metadata informer.
type bdEvents struct{ adds, updates, deletes atomic.Int64 }

func (e *bdEvents) total() int64 { return e.adds.Load() + e.updates.Load() + e.deletes.Load() }

// pprofAddr, when set, is where the manager serves Go profiles.
var pprofAddr string

// managerMemLimit, when set, is the manager's GOMEMLIMIT, as a memory limit
// on its container would set it (internal/memlimit: 80% of the limit).
var managerMemLimit string

func startManager(cp *controlplane.ControlPlane, extra ...string) (*manager, error) {
	logDir, _ := os.MkdirTemp("", "fleet-bench-")
	fmt.Fprintf(os.Stderr, "Starting fleet-manager (log in %s)\n", logDir)
	metricsAddr, err := framework.FreeAddr()
	if err != nil {
		return nil, err
	}
	webhookAddr, err := framework.FreeAddr()
	if err != nil {
		return nil, err
	}
	// The commit experiment's push webhook, signed with a secret of the
	// bench's.
	secret := fmt.Sprintf("bench-%d", time.Now().UnixNano())
	secretFile := filepath.Join(logDir, "webhook-secret")
	if err := os.WriteFile(secretFile, []byte(secret), 0o600); err != nil {
		return nil, err
	}
	args := []string{"--kubeconfig", cp.Kubeconfig,
		"--api-server-url", cp.Config.Host, "--kube-api-qps", "5000", "--kube-api-burst", "10000",
		"--webhook-bind-address", webhookAddr, "--webhook-secret-file", secretFile,
		"--metrics-bind-address", metricsAddr,
		// The simulated agents run no agent Deployment: agent Bundles (one
		// Bundle and one BundleDeployment per cluster, rolled out in
		// batches) would measure the agent rollout, not the fan-out.
		"--agent-bundles=false",
		// The commit and notify experiments' git servers and the notify
		// experiment's webhook receiver listen on loopback.
		framework.EgressAllowLoopbackArgs[0], framework.EgressAllowLoopbackArgs[1]}
	args = append(args, extra...)
	if pprofAddr != "" {
		fmt.Fprintf(os.Stderr, "The manager serves profiles at http://%s/debug/pprof/\n", pprofAddr)
		args = append(args, "--pprof-bind-address", pprofAddr)
	}
	var env []string
	if managerMemLimit != "" {
		env = []string{"GOMEMLIMIT=" + managerMemLimit}
	}
	p, err := framework.StartManagerProcessEnv(logDir, "manager", env, args...)
	if err != nil {
		return nil, err
	}
	return &manager{Process: p, metricsURL: "http://" + metricsAddr + "/metrics",
		webhookURL: "http://" + webhookAddr + "/", webhookSecret: secret}, nil
}

// watchBDs starts, until ctx ends, the metadata watch of every
// BundleDeployment that counts the manager's writes to them (Retarget). It is
// not kept during the rollouts, whose BundleDeployments the agents count
// (observeAgents): one more watcher of every write would be the
// measurement's cost.
func (f *fleetRun) watchBDs(ctx context.Context) error {
	if f.events != nil {
		return nil
	}
	c, err := cache.New(f.cp.Config, cache.Options{Scheme: controllers.Scheme()})
	if err != nil {
		return err
	}
	obj := &metav1.PartialObjectMetadata{}
	obj.SetGroupVersionKind(fleet.GroupVersion.WithKind("BundleDeployment"))
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return err
	}
	events := &bdEvents{}
	managed := func(o interface{}) bool {
		m, ok := o.(*metav1.PartialObjectMetadata)
		return ok && m.Labels[fleet.ManagedLabel] == "true"
	}
	reg, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o interface{}) {
			if managed(o) {
				events.adds.Add(1)
			}
		},
		UpdateFunc: func(old, o interface{}) {
			// Spec writes only: the agents' status writes are not the manager's.
			if managed(o) && old.(*metav1.PartialObjectMetadata).Generation != o.(*metav1.PartialObjectMetadata).Generation {
				events.updates.Add(1)
			}
		},
		DeleteFunc: func(o interface{}) { events.deletes.Add(1) },
	})
	if err != nil {
		return err
	}
	go func() { _ = c.Start(ctx) }()
	// Synced once the handler has had the list: its adds are not writes.
	if !toolscache.WaitForCacheSync(ctx.Done(), reg.HasSynced) {
		return fmt.Errorf("the BundleDeployment watch did not sync")
	}
	f.events = events
	return nil
}

// watchBundles watches the Bundles of the default workspace until ctx ends
// and returns them as the watch has them.
func watchBundles(ctx context.Context, cp *controlplane.ControlPlane) (client.Reader, error) {
	c, err := cache.New(cp.Config, cache.Options{Scheme: controllers.Scheme(),
		DefaultNamespaces: map[string]cache.Config{fleet.DefaultWorkspace: {}},
		DefaultTransform:  cache.TransformStripManagedFields()})
	if err != nil {
		return nil, err
	}
	if _, err := c.GetInformer(ctx, &fleet.Bundle{}); err != nil {
		return nil, err
	}
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return nil, fmt.Errorf("the Bundle watch did not sync")
	}
	return c, nil
}

// observeAgents has every agent tell fn of the deployments it sees and the
// Ready status it writes (simagent.Agent.SetObserver; nil: none).
func (f *fleetRun) observeAgents(fn func(*fleet.BundleDeployment)) {
	for _, a := range f.agents {
		a.SetObserver(fn)
	}
}

func (f *fleetRun) measure(r Result, cpuBefore float64) Result {
	r.Clusters, r.Bundles = f.n, f.b
	f.started.since(context.Background(), f.cp, &r)
	r.ManagerRSSMB = peakRSSMB(f.mgr)
	r.ManagerCPUS = cpuSeconds(f.mgr) - cpuBefore
	r.setMetricsCPU(f.mgr.metricsUpdateSeconds() - f.metricsBefore)
	return r
}

// Register: N simulated agents register at once, with one token.
func (f *fleetRun) Register(ctx context.Context) error {
	tokenCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	_, boot, err := agentinstall.CreateToken(tokenCtx, f.c, agentinstall.TokenOptions{Namespace: fleet.DefaultWorkspace, Name: "bench"})
	if err != nil {
		return err
	}
	boot.APIServerURL, boot.APIServerCA = f.cp.Config.Host, string(f.cp.Config.CAData)
	host, err := simagent.HostClient(f.cp.Config)
	if err != nil {
		return err
	}
	// What an install leaves in each cluster is written first, and not timed.
	if err := simagent.PrepareAll(ctx, host, f.n, boot, func(i int) map[string]string {
		return map[string]string{"env": []string{"dev", "test", "prod"}[i%3], "bench": "true"}
	}); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "Registering %d simulated agents at once\n", f.n)
	f.markProfiled(ctx)
	cpu := cpuSeconds(f.mgr)
	start := time.Now()
	f.progress.enter("register")
	agents, took, err := simagent.RegisterPreparedCounting(ctx, host, f.n, f.progress.counter())
	if err != nil {
		f.finishProfiles(nil)
		return err
	}
	s := since(start)
	f.agents = agents
	f.progress.setAgents(agents)
	f.progress.enter("settle")
	sort.Slice(took, func(i, j int) bool { return took[i] < took[j] })
	// The manager finishes its part (the Clusters' status) after the last
	// agent holds its credential: the writes are counted until they settle.
	end := waitWritesSettle(ctx, f.cp, 3*time.Second, time.Minute)
	r := Result{Experiment: "register", Objects: f.n, Seconds: s, Rate: float64(f.n) / s,
		P50: took[len(took)/2].Seconds(), P99: took[len(took)*99/100].Seconds(), Note: f.registrationTimeline(ctx, start)}
	r = f.measure(r, cpu)
	f.finishProfiles(&r)
	r.APIServerCPUMsPerReg = 1000 * r.APIServerCPUS / float64(f.n)
	// The simulated agents keep what a real agent keeps in its own
	// cluster on this API server too: those writes are not the
	// management cluster's, and the audit log tells them apart.
	downstream := 0
	if c, ok := f.audited(end, &r); ok {
		downstream = c.writer("downstream")
		r.Note += fmt.Sprintf("; writes per registration by writer: manager %.1f, agent %.1f (downstream, not counted: %.1f)",
			float64(c.writer("manager"))/float64(f.n), float64(c.writer("agent"))/float64(f.n), float64(downstream)/float64(f.n))
	} else {
		r.Note += "; without the audit log the writes per registration hold the simulated agents' own-cluster writes too"
	}
	r.WritesPerRegistration = (r.APIWritesTotal - float64(downstream)) / float64(f.n)
	countObjects(ctx, f.cp.Config, &r)
	f.results = append(f.results, r)
	printJSON(r)
	for _, a := range agents {
		runSimAgent(ctx, a.Run)
	}
	// A rollout reaches clusters whose agents joined earlier: their first
	// check-in (a Lease created, folded into the Cluster) and list are
	// not the rollout's, so the experiments after start once they are done.
	if err := waitFor(ctx, 10*time.Minute, func() (bool, error) {
		for _, a := range agents {
			if !a.Started.Load() {
				return false, nil
			}
		}
		return true, nil
	}); err != nil {
		return fmt.Errorf("waiting for the agents' first check-in and list: %w", err)
	}
	waitWritesSettle(ctx, f.cp, 3*time.Second, time.Minute)
	return nil
}

// registrationTimeline tells, from the objects' creation times, when the
// agents' requests reached the API server and when the manager started
// granting them (made their Clusters), in seconds after start: it separates
// the agents' side of the wait from the manager's.
func (f *fleetRun) registrationTimeline(ctx context.Context, start time.Time) string {
	quantiles := func(ts []time.Time) string {
		if len(ts) == 0 {
			return "none"
		}
		sort.Slice(ts, func(i, j int) bool { return ts[i].Before(ts[j]) })
		at := func(q float64) float64 { return ts[int(q*float64(len(ts)-1))].Sub(start).Seconds() }
		return fmt.Sprintf("first %.0fs, p50 %.0fs, last %.0fs", at(0), at(0.5), at(1))
	}
	regs := &fleet.ClusterRegistrationList{}
	clusters := &fleet.ClusterList{}
	if err := f.c.List(ctx, regs, client.InNamespace(fleet.DefaultWorkspace)); err != nil {
		return err.Error()
	}
	if err := f.c.List(ctx, clusters, client.InNamespace(fleet.DefaultWorkspace)); err != nil {
		return err.Error()
	}
	var requested, granting []time.Time
	for _, r := range regs.Items {
		requested = append(requested, r.CreationTimestamp.Time)
	}
	for _, c := range clusters.Items {
		granting = append(granting, c.CreationTimestamp.Time)
	}
	return fmt.Sprintf("requests created: %s; grants started (Clusters made): %s", quantiles(requested), quantiles(granting))
}

// startFleetRun gives f its client and starts the manager; the caller
// stops f.mgr.
func startFleetRun(f *fleetRun) (*fleetRun, error) {
	var err error
	if f.c, err = newClient(f.cp.Config); err != nil {
		return nil, err
	}
	if f.mgr, err = startManager(f.cp); err != nil {
		return nil, err
	}
	return f, nil
}

// FanoutReady creates B bundles of 10 KB targeting every agent's cluster and
// times until N*B BundleDeployments exist (fanout) and until every Bundle
// counts all clusters Ready (ready), comparing the rates with the ceilings
// (0: not measured). The API server's CPU profile covers both.
func (f *fleetRun) FanoutReady(ctx context.Context, ceiling, crCeiling float64) error {
	want := int64(f.n * f.b)
	idle := f.idleCores(ctx)
	f.markProfiled(ctx)
	cpu := cpuSeconds(f.mgr)
	// At 10,000 x 10 on a loaded machine the fan-out alone takes longer
	// than half an hour: the waits allow 20 BundleDeployments a second.
	limit := max(30*time.Minute, time.Duration(want/20)*time.Second)
	// The fan-out is counted as the agents see the BundleDeployments.
	var mu sync.Mutex
	seen := map[string]bool{}
	f.observeAgents(func(bd *fleet.BundleDeployment) {
		if bd.Labels[fleet.ManagedLabel] != "true" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if key := bd.Namespace + "/" + bd.Name; !seen[key] {
			seen[key] = true
			f.seen.Add(1)
		}
	})
	defer f.observeAgents(nil)
	// The Bundles' summaries are read as they are written, from a watch,
	// not listed from the API server over and over.
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	bundles, err := watchBundles(watchCtx, f.cp)
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "Creating %d bundles of 10 KB for %d clusters\n", f.b, f.n)
	start := time.Now()
	f.progress.enter("ready")
	if err := createBundles(ctx, f.c, f.b); err != nil {
		return err
	}
	if err := waitFor(ctx, limit, func() (bool, error) { return f.seen.Load() >= want, nil }); err != nil {
		return fmt.Errorf("%d of %d BundleDeployments seen by their agents: %w", f.seen.Load(), want, err)
	}
	fan := since(start)
	r := f.measure(Result{Experiment: "fanout", Objects: int(want), Seconds: fan, Rate: float64(want) / fan}, cpu)
	ratios(&r, ceiling, crCeiling)
	r.APIServerCPUMsPerBD = 1000 * r.APIServerCPUS / float64(want)
	f.results = append(f.results, r)
	printJSON(r)
	if err := waitEvery(ctx, 50*time.Millisecond, limit, func() (bool, error) {
		list := &fleet.BundleList{}
		if err := bundles.List(ctx, list, client.InNamespace(fleet.DefaultWorkspace)); err != nil {
			return false, err
		}
		for _, b := range list.Items {
			if b.Status.Summary.Ready < f.n {
				return false, nil
			}
		}
		return len(list.Items) == f.b, nil
	}); err != nil {
		f.finishProfiles(nil)
		return fmt.Errorf("ready: %w", err)
	}
	ready := since(start)
	r = Result{Experiment: "ready", Objects: int(want), Seconds: ready, Rate: float64(want) / ready,
		Note: fmt.Sprintf("%.2fx the fanout time", ready/fan)}
	r = f.measure(r, cpu)
	f.finishProfiles(&r)
	ratios(&r, ceiling, crCeiling)
	if f.floor > 0 {
		r.FloorRatio = r.Rate / f.floor
		r.Note += fmt.Sprintf("; %.0f%% of the floor (cr-floor)", 100*r.FloorRatio)
	}
	r.APIServerCPUMsPerBD = 1000 * r.APIServerCPUS / float64(want)
	if idle > 0 {
		r.APIServerIdleCores = idle
		r.APIServerCPUMsPerBDNet = 1000 * max(0, r.APIServerCPUS-idle*ready) / float64(want)
		r.Note += fmt.Sprintf("; the API server's standing cost with %d agents joined: %.2f cores (%.1f ms per BundleDeployment over this rollout, %.1f ms net of it)",
			f.n, idle, 1000*idle*ready/float64(want), r.APIServerCPUMsPerBDNet)
	}
	cpuNote(&r, f.floorResult)
	countObjects(ctx, f.cp.Config, &r)
	f.results = append(f.results, r)
	printJSON(r)
	return nil
}

// idleWindow is how long idleCores measures (-idle-window).
var idleWindow = 20 * time.Second

// idleCores is the API server's CPU, in cores, over idleWindow with the
// agents joined and nothing rolling out (0 when not measured): what N
// clusters cost it standing still, which any rollout pays for as long as
// it lasts.
func (f *fleetRun) idleCores(ctx context.Context) float64 {
	if idleWindow <= 0 {
		return 0
	}
	before, start := apiServerCPU(f), time.Now()
	select {
	case <-ctx.Done():
		return 0
	case <-time.After(idleWindow):
	}
	return (apiServerCPU(f) - before) / time.Since(start).Seconds()
}

// ratios sets r's rate over the ceilings that were measured.
func ratios(r *Result, ceiling, crCeiling float64) {
	if ceiling > 0 {
		r.CeilingRatio = r.Rate / ceiling
	}
	if crCeiling > 0 {
		r.CRCeilingRatio = r.Rate / crCeiling
		r.Note = strings.TrimPrefix(r.Note+fmt.Sprintf("; %.0f%% of the custom-resource ceiling", 100*r.CRCeilingRatio), "; ")
	}
}

// Retarget relabels one cluster out of every bundle's targets and counts the
// BundleDeployment writes until things settle.
func (f *fleetRun) Retarget(ctx context.Context) error {
	a := f.agents[0]
	cluster := &fleet.Cluster{}
	if err := f.c.Get(ctx, types.NamespacedName{Namespace: a.Cred.Namespace, Name: a.Cred.ClusterName}, cluster); err != nil {
		return err
	}
	// The watch of every BundleDeployment ends with the experiment: the
	// experiments after it are measured without it.
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer func() { stopWatch(); f.events = nil }()
	if err := f.watchBDs(watchCtx); err != nil {
		return err
	}
	f.mark(ctx)
	cpu := cpuSeconds(f.mgr)
	before := f.events.total()
	start := time.Now()
	patch := client.MergeFrom(cluster.DeepCopy())
	cluster.Labels["bench"] = "false"
	if err := f.c.Patch(ctx, cluster, patch); err != nil {
		return err
	}
	if err := waitFor(ctx, 5*time.Minute, func() (bool, error) { return f.events.deletes.Load() >= int64(f.b), nil }); err != nil {
		return err
	}
	s := since(start)
	time.Sleep(2 * time.Second) // anything else it would write shows up here
	writes := f.events.total() - before
	r := f.measure(Result{Experiment: "retarget", Objects: int(writes), Seconds: s,
		Note: fmt.Sprintf("%d BundleDeployment writes for %d that had to go", writes, f.b)}, cpu)
	f.results = append(f.results, r)
	printJSON(r)
	return nil
}

// Heartbeat has every agent check in twice within a window and reports the
// manager CPU spent per heartbeat beyond its idle use over the same time,
// and the writes per heartbeat: the manager's (beyond its idle writes) and
// the agents', by namespace kind, from the audit log.
func (f *fleetRun) Heartbeat(ctx context.Context) error {
	window := 10 * time.Second
	// Idle means after the manager's writes from the experiments before.
	waitWritesSettle(ctx, f.cp, 3*time.Second, time.Minute)
	idleFrom := f.audit.offset()
	idleStart := cpuSeconds(f.mgr)
	time.Sleep(window)
	idle := cpuSeconds(f.mgr) - idleStart
	idleManagerWrites := 0
	if f.audit != nil {
		if c, err := f.audit.count(idleFrom, time.Time{}, f.kinds()); err == nil {
			idleManagerWrites = c.writer("manager")
		}
	}
	f.markProfiled(ctx)
	cpu := cpuSeconds(f.mgr)
	start := time.Now()
	beats := 0
	for range 2 {
		if err := parallel(32, len(f.agents), func(i int) error { return f.agents[i].Beat(ctx) }); err != nil {
			f.finishProfiles(nil)
			return err
		}
		beats += len(f.agents)
		time.Sleep(window / 2)
	}
	// What the manager makes of the check-ins may come later: counted
	// until the writes settle.
	end := waitWritesSettle(ctx, f.cp, 3*time.Second, 30*time.Second)
	spent := cpuSeconds(f.mgr) - cpu - idle
	s := since(start)
	r := Result{Experiment: "heartbeat", Objects: beats, Seconds: s, Rate: float64(beats) / s,
		Note: fmt.Sprintf("manager CPU per heartbeat %.3f ms (idle %.2f s per %s subtracted)", 1000*max(spent, 0)/float64(beats), idle, window)}
	r = f.measure(r, cpu)
	f.finishProfiles(&r)
	r.APIServerCPUMsPerBeat = 1000 * r.APIServerCPUS / float64(beats)
	if c, ok := f.audited(end, &r); ok {
		// The manager's idle writes over as long as this window took.
		idleShare := float64(idleManagerWrites) * s / window.Seconds()
		mgr := max(float64(c.writer("manager"))-idleShare, 0) / float64(beats)
		agent := float64(c.writer("agent")) / float64(beats)
		r.ManagerWritesPerBeat, r.AgentWritesPerBeat = &mgr, &agent
		r.AgentWritesByNS, r.ManagerWritesByNS = c.byWriter["agent"], c.byWriter["manager"]
		r.Note += fmt.Sprintf("; manager writes: %d in the window, %d in %s idle before", c.writer("manager"), idleManagerWrites, window)
	} else {
		r.Note += fmt.Sprintf("; without the audit log: %.2f API writes per heartbeat, all writers", r.APIWritesTotal/float64(beats))
	}
	f.results = append(f.results, r)
	printJSON(r)
	return nil
}
