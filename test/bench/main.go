// Command bench measures the manager at scale against a fresh local control
// plane and prints one JSON line per experiment, then a table for people.
//
//   - ceiling: raw creates/s of small objects with 32 clients, the limit of
//     this API server on this machine;
//   - fanout: N clusters x B bundles (10 KB each): time until N*B
//     BundleDeployments exist, and that rate as a fraction of the ceiling;
//   - register, ready, retarget, heartbeat: with N simulated agents
//     (agents.go);
//   - commit: a commit pushed to a loopback git server and its webhook
//     delivered, until every cluster runs it (commit.go), beside
//     commit-floor;
//   - scaling: registration and ready at two sizes, each on a fresh
//     control plane (scaling.go);
//   - sealing: downstreamResources sealed per cluster with N simulated
//     agents (sealing.go);
//   - agent: one real fleet-agent process (its memory, idle CPU and
//     requests, bandwidth, reconnect and start; agent.go);
//   - content: bundles of 0 to 1.9 MiB of content to every cluster, in
//     etcd and in OCI storage on a loopback registry: the bytes etcd
//     stores per bundle and per BundleDeployment, the registry's traffic,
//     the time to Ready, each beside its floor (content.go);
//   - dashboard: `fleet dashboard` over the N x B Ready deployments: its
//     first pages' time and bytes, its memory, its CPU per status update
//     while a page follows it (dashboard.go).
//
// Beside each experiment's figures: the API server's requests (its
// counters), its CPU profile by kind of work (apiprofile.go), who wrote
// where (its audit log, audit.go), and what etcd holds. docs/scale.md
// tells what each figure means.
//
// The manager runs as its own process (the real fleet-manager binary), so its
// peak RSS and CPU time are its own.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/go-logr/logr"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework"
)

// Result is one experiment's figures.
type Result struct {
	Experiment   string  `json:"experiment"`
	Clusters     int     `json:"clusters"`
	Bundles      int     `json:"bundles"`
	Objects      int     `json:"objects"`
	Seconds      float64 `json:"seconds"`
	Rate         float64 `json:"rate"`
	CeilingRatio float64 `json:"ceiling_ratio,omitempty"`
	P50          float64 `json:"p50_s,omitempty"`
	P99          float64 `json:"p99_s,omitempty"`
	ManagerRSSMB float64 `json:"manager_rss_mb,omitempty"`
	ManagerCPUS  float64 `json:"manager_cpu_s,omitempty"`
	Note         string  `json:"note,omitempty"`
	// APIWrites counts the API server's write requests during the
	// experiment, by verb and resource.
	APIWrites string `json:"api_writes,omitempty"`
	// APIReads counts its read requests (GET, LIST, WATCH) the same way.
	APIReads string `json:"api_reads,omitempty"`
	// CPU seconds of kube-apiserver, etcd, and this process (the simulated
	// agents and the bench's own clients) during the experiment.
	APIServerCPUS float64 `json:"apiserver_cpu_s,omitempty"`
	EtcdCPUS      float64 `json:"etcd_cpu_s,omitempty"`
	BenchCPUS     float64 `json:"bench_cpu_s,omitempty"`
	// MetricsUpdateS is the time the manager's state-metrics handlers spent
	// (fleet_metrics_update_seconds_total over the experiment), and
	// MetricsShare that time as a share of ManagerCPUS.
	MetricsUpdateS float64 `json:"metrics_update_s,omitempty"`
	MetricsShare   float64 `json:"metrics_share,omitempty"`

	// APIWritesTotal is the API server's write requests during the
	// experiment (its request counters: create, update, patch, delete).
	APIWritesTotal float64 `json:"api_writes_total,omitempty"`
	// CRCeilingRatio is Rate over the custom-resource ceiling measured on
	// the same API server.
	CRCeilingRatio float64 `json:"cr_ceiling_ratio,omitempty"`
	// FloorRatio is Rate over the cr-floor rate measured on the same API
	// server: how near the least a Ready BundleDeployment costs it comes.
	FloorRatio float64 `json:"floor_ratio,omitempty"`
	// NotifyProfileShare is, in the notify experiment, the share of the
	// manager's CPU profile in the notification controller and senders.
	NotifyProfileShare float64 `json:"notify_profile_share,omitempty"`
	// Shares of the API server's CPU profile over the experiment by kind
	// of work (apiprofile.go; they overlap), AuthzShare the authorizers'
	// share, ProfileCPUS the CPU seconds the profile holds.
	Shares      map[string]float64 `json:"shares,omitempty"`
	AuthzShare  float64            `json:"authz_share,omitempty"`
	ProfileCPUS float64            `json:"profile_cpu_s,omitempty"`
	// API server CPU (its /proc time) per Ready BundleDeployment and per
	// registration.
	APIServerCPUMsPerBD  float64 `json:"apiserver_cpu_ms_per_bd,omitempty"`
	APIServerCPUMsPerReg float64 `json:"apiserver_cpu_ms_per_registration,omitempty"`
	// APIServerIdleCores is the API server's CPU (cores) with N agents
	// joined and nothing rolling out: their watches, check-ins and Leases,
	// measured over -idle-window before the rollout. APIServerCPUMsPerBDNet
	// is APIServerCPUMsPerBD less that standing cost over the rollout's
	// time: what the rollout itself cost per BundleDeployment.
	APIServerIdleCores     float64 `json:"apiserver_idle_cores,omitempty"`
	APIServerCPUMsPerBDNet float64 `json:"apiserver_cpu_ms_per_bd_net,omitempty"`
	// APIServerCPUMsPerBeat is its CPU per heartbeat (agent check-in and
	// whatever the manager makes of it).
	APIServerCPUMsPerBeat float64 `json:"apiserver_cpu_ms_per_heartbeat,omitempty"`
	// WritesPerRegistration is the management cluster's API writes per
	// registration, until its writes settle.
	WritesPerRegistration float64 `json:"writes_per_registration,omitempty"`
	// Heartbeat: the manager's writes per heartbeat (beyond its idle
	// writes), and the writes of agents and manager by namespace kind
	// (cluster, workspace, none, other) from the audit log.
	ManagerWritesPerBeat *float64       `json:"manager_writes_per_heartbeat,omitempty"`
	AgentWritesPerBeat   *float64       `json:"agent_writes_per_heartbeat,omitempty"`
	AgentWritesByNS      map[string]int `json:"agent_writes_by_ns,omitempty"`
	ManagerWritesByNS    map[string]int `json:"manager_writes_by_ns,omitempty"`
	// AuditWrites is who wrote what where, from the audit log.
	AuditWrites string `json:"audit_writes,omitempty"`
	// EtcdObjects is what the API server holds in etcd as the experiment
	// ended (counted by listing), the kinds holding most, and the size of
	// etcd's database (refreshed about once a minute).
	EtcdObjects       float64 `json:"etcd_objects,omitempty"`
	EtcdObjectsByKind string  `json:"etcd_objects_by_kind,omitempty"`
	EtcdDBMB          float64 `json:"etcd_db_mb,omitempty"`
	// Load1 is the machine's load average over the last minute as the
	// experiment ended: the machine may be shared.
	Load1 float64 `json:"load_1m,omitempty"`
	// Scaling: the ready rate and custom-resource ceiling at each size, and
	// the rate at the largest size over the rate at the smallest.
	ReadyRates map[string]float64 `json:"ready_rates,omitempty"`
	CRCeilings map[string]float64 `json:"cr_ceilings,omitempty"`
	ScaleRatio float64            `json:"scale_ratio,omitempty"`
	// Dashboard holds the dashboard experiment's figures.
	Dashboard *DashboardFigures `json:"dashboard,omitempty"`
	// Monorepo: the GitRepos reading the repository, and per commit the
	// git server's ls-remotes, fetches (upload-pack POSTs) and bytes, and
	// the manager's CPU; GitRatio and CPURatio are the bytes and the CPU of
	// the many GitRepos over those of the one.
	GitRepos              int     `json:"gitrepos,omitempty"`
	GitListsPerCommit     float64 `json:"git_ls_remotes_per_commit,omitempty"`
	GitFetchesPerCommit   float64 `json:"git_fetches_per_commit,omitempty"`
	GitBytesPerCommit     float64 `json:"git_bytes_per_commit,omitempty"`
	ManagerCPUMsPerCommit float64 `json:"manager_cpu_ms_per_commit,omitempty"`
	GitRatio              float64 `json:"git_bytes_ratio,omitempty"`
	CPURatio              float64 `json:"manager_cpu_ratio,omitempty"`
	// ReconcilesPerCommit are the manager's reconciles per commit, by
	// controller (controller-runtime's controller_runtime_reconcile_total).
	ReconcilesPerCommit map[string]float64 `json:"reconciles_per_commit,omitempty"`
	// CPUScaleRatio is the API server's CPU per Ready BundleDeployment at
	// the smallest size over that at the largest: the rate ratio to expect
	// were its CPU the only limit, whatever the machine's load.
	CPUScaleRatio float64 `json:"cpu_scale_ratio,omitempty"`
	// CPUScaleRatioNet is CPUScaleRatio with APIServerCPUMsPerBDNet.
	CPUScaleRatioNet float64 `json:"cpu_scale_ratio_net,omitempty"`
	// Sealing: the bytes spec.sealedResources adds to a BundleDeployment,
	// and after a change of one source the BundleDeployments written again
	// that name it (Resealed) and that do not (ResealedOther).
	SealedBytesPerBD float64 `json:"sealed_bytes_per_bd,omitempty"`
	Resealed         int     `json:"resealed,omitempty"`
	ResealedOther    int     `json:"resealed_other,omitempty"`
	// Commit: from the push webhook's delivery to the first and the last
	// BundleDeployment written with the new commit, and the commit-floor's
	// time for as many BundleDeployments.
	WebhookToFirstBDS float64 `json:"webhook_to_first_bd_s,omitempty"`
	WebhookToLastBDS  float64 `json:"webhook_to_last_bd_s,omitempty"`
	FloorSeconds      float64 `json:"floor_s,omitempty"`
	// SimAgentCPUS is the CPU the simulated agents spent in this process
	// over the experiment (from its CPU profile, by goroutine label), and
	// SimAgentCPUMsPerBD that per BundleDeployment: what the real agents
	// would spend in their own clusters, not the management cluster.
	SimAgentCPUS       float64 `json:"simagent_cpu_s,omitempty"`
	SimAgentCPUMsPerBD float64 `json:"simagent_cpu_ms_per_bd,omitempty"`
	// ManagementCPUMsPerBD is the CPU of the API server, etcd and the
	// manager per BundleDeployment (the simulated agents not counted), and
	// CPUFloorRatio the floor's (its API server and etcd) over it: the
	// ratio to the floor were the machine's CPU the only limit.
	ManagementCPUMsPerBD float64 `json:"management_cpu_ms_per_bd,omitempty"`
	CPUFloorRatio        float64 `json:"cpu_floor_ratio,omitempty"`
	// Content holds the content experiment's figures.
	Content *ContentFigures `json:"content,omitempty"`
}

// setMetricsCPU records the state-metrics handlers' time s.
func (r *Result) setMetricsCPU(s float64) {
	r.MetricsUpdateS = s
	if r.ManagerCPUS > 0 {
		r.MetricsShare = s / r.ManagerCPUS
	}
}

// experimentNames are the experiments -experiments may name, besides all.
const experimentNames = "ceiling,cr-ceiling,cr-floor,register-floor,commit-floor,fanout,register,ready,commit,retarget,heartbeat,dashboard,sealing,notify,agent,scaling,monorepo,content"

func main() {
	clusters := flag.Int("clusters", 1000, "simulated clusters (N)")
	bundles := flag.Int("bundles", 10, "bundles (B)")
	experiments := flag.String("experiments", "all", "comma-separated: "+experimentNames+" (all = every one but notify, scaling, monorepo and content; scaling starts its own control planes)")
	sizes := flag.String("scaling-sizes", "500,5000", "scaling experiment: the numbers of clusters to compare, each on a fresh control plane and manager")
	flag.DurationVar(&idleWindow, "idle-window", idleWindow, "ready and scaling experiments: how long to measure the API server's CPU with the agents joined and nothing rolling out, before the rollout (0: not measured)")
	flag.DurationVar(&progressEvery, "progress-every", progressEvery, "scaling experiment: how often to print the figures so far (a line with \"progress\" on stderr)")
	flag.IntVar(&monorepoApps, "monorepo-gitrepos", 100, "monorepo experiment: the GitRepos (one app directory each) compared with one GitRepo reading every directory")
	flag.IntVar(&monorepoCommits, "monorepo-commits", 3, "monorepo experiment: the commits measured")
	flag.StringVar(&managerMemLimit, "manager-gomemlimit", "", "the manager's GOMEMLIMIT (e.g. 800MiB, what a 1000Mi container limit gives it); default none, as without a container limit")
	flag.StringVar(&pprofAddr, "pprof", "", "serve the manager's Go profiles at this address (e.g. 127.0.0.1:6060)")
	flag.BoolVar(&profileEnabled, "apiserver-profile", true, "read the API server's CPU profile during registration and fan-out")
	flag.StringVar(&profileDir, "apiserver-profile-dir", "", "also write the API server's CPU profiles into this directory")
	flag.BoolVar(&auditEnabled, "audit", true, "log the API server's writes (audit, level Metadata) to count them by writer and namespace; the scaling experiment runs without it")
	flag.StringVar(&agentOpts.Binary, "agent-binary", "", "agent experiment: the fleet-agent to measure, with fleet-agent-deploy beside it (default: both built as they ship)")
	flag.DurationVar(&agentOpts.Idle, "agent-idle", 2*time.Minute, "agent experiment: idle window")
	flag.DurationVar(&agentOpts.Checkin, "agent-checkin", time.Minute, "agent experiment: the agent's check-in interval")
	flag.DurationVar(&agentOpts.Resync, "agent-resync", time.Minute, "agent experiment: the agent's resync interval")
	flag.DurationVar(&agentOpts.Settle, "agent-settle", 30*time.Second, "agent experiment: wait before reading memory")
	flag.BoolVar(&agentOpts.HeapProfile, "agent-heap-profile", false,
		"agent experiment: sample the agent's heap to tell what holds it (its function tables then take more pages: not the agent as it ships)")
	flag.DurationVar(&agentOpts.Cut, "agent-cut", 30*time.Second, "agent experiment: how long the link to the manager is cut")
	flag.IntVar(&dashboardOpts.Updates, "dashboard-updates", 200, "dashboard experiment: BundleDeployment status updates driven while a page follows the dashboard (at most -clusters)")
	flag.Float64Var(&dashboardOpts.Rate, "dashboard-rate", 10, "dashboard experiment: status updates per second")
	flag.DurationVar(&dashboardOpts.Idle, "dashboard-idle", 10*time.Second, "dashboard experiment: window measuring the dashboard's idle CPU")
	flag.IntVar(&notifyRounds, "notify-rounds", notifyRounds, "notify experiment: measured rollouts each way, without and with a Notification")
	selfProfile := flag.String("self-profile", "", "write this process's CPU profile (the simulated agents and the bench's clients) to this file")
	flag.Parse()
	ctrl.SetLogger(logr.Discard())
	scaling, err := parseSizes(*sizes)
	if err == nil {
		// The profile is written before os.Exit: runProfiled stops it.
		err = runProfiled(*selfProfile, func() error { return run(*clusters, *bundles, *experiments, scaling) })
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// runProfiled runs f under a CPU profile of this process written to path,
// or without one if path is empty.
func runProfiled(path string, f func() error) error {
	if path == "" {
		return f()
	}
	stop, err := profileSelf(path)
	if err != nil {
		return err
	}
	defer func() { _ = stop() }()
	return f()
}

// profileSelf starts this process's CPU profile into path; the returned
// function ends and writes it.
func profileSelf(path string) (func() error, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() error {
		pprof.StopCPUProfile()
		return f.Close()
	}, nil
}

// parseSizes reads -scaling-sizes: two or more cluster counts.
func parseSizes(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("-scaling-sizes %q: want cluster counts separated by commas, like 500,5000", s)
		}
		out = append(out, n)
	}
	if len(out) < 2 {
		return nil, fmt.Errorf("-scaling-sizes %q: want at least two sizes to compare, like 500,5000", s)
	}
	return out, nil
}

// agentOpts are the agent experiment's flags.
var agentOpts AgentOptions

// auditEnabled logs the bench API server's writes (-audit).
var auditEnabled bool

// startControlPlane starts a control plane for the bench: generous
// in-flight limits, profiling on, and with audit an audit log of writes
// (nil without).
func startControlPlane(name string, audit bool) (*controlplane.ControlPlane, *auditLog, error) {
	args := map[string][]string{
		"max-requests-inflight": {"800"}, "max-mutating-requests-inflight": {"400"}, "profiling": {"true"},
	}
	var log *auditLog
	var dir string
	if audit {
		var err error
		if dir, err = os.MkdirTemp("", "fleet-bench-audit-"); err != nil {
			return nil, nil, err
		}
		var extra map[string][]string
		if log, extra, err = auditArgs(dir); err != nil {
			return nil, nil, err
		}
		for k, v := range extra {
			args[k] = v
		}
	}
	cp, err := controlplane.Start(controlplane.Options{Name: name, APIServerArgs: args})
	if err != nil {
		log.remove()
		return nil, nil, err
	}
	if log != nil {
		if err := log.learnAdmin(context.Background(), cp.Config); err != nil {
			_ = cp.Stop()
			log.remove()
			return nil, nil, err
		}
		fmt.Fprintf(os.Stderr, "The API server's audit log of writes: %s\n", log.path)
	}
	return cp, log, nil
}

func run(n, b int, which string, sizes []int) error {
	want := map[string]bool{}
	for _, e := range strings.Split(which, ",") {
		want[strings.TrimSpace(e)] = true
	}
	for e := range want {
		if e != "all" && !slices.Contains(strings.Split(experimentNames, ","), e) {
			return fmt.Errorf("-experiments %q: no experiment %q; pick from all,%s", which, e, experimentNames)
		}
	}
	if (want["all"] || want["dashboard"]) && (dashboardOpts.Updates < 1 || dashboardOpts.Updates > n || dashboardOpts.Rate <= 0 || dashboardOpts.Idle <= 0) {
		return fmt.Errorf("-dashboard-updates %d, -dashboard-rate %g, -dashboard-idle %s: want 1 to -clusters (%d) updates, a positive rate and window",
			dashboardOpts.Updates, dashboardOpts.Rate, dashboardOpts.Idle, n)
	}
	// Interrupted, it still stops the control plane and the manager.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	defer framework.RemoveBinaries()
	var results []Result
	others := 0
	for e := range want {
		if e != "scaling" && e != "monorepo" {
			others++
		}
	}
	if others > 0 {
		var err error
		if results, err = runMain(ctx, n, b, want); err != nil {
			return err
		}
	}
	if want["monorepo"] {
		rs, err := runMonorepo(ctx)
		results = append(results, rs...)
		if err != nil {
			_ = printTable(results)
			return fmt.Errorf("monorepo: %w", err)
		}
	}
	if want["scaling"] {
		rs, err := Scaling(ctx, sizes, b)
		results = append(results, rs...)
		if err != nil {
			_ = printTable(results)
			return fmt.Errorf("scaling: %w", err)
		}
	}
	if len(results) == 0 {
		return nil // the agent experiment prints its own lines
	}
	return printTable(results)
}

// runMain runs every experiment but scaling on one control plane.
func runMain(ctx context.Context, n, b int, want map[string]bool) ([]Result, error) {
	all := want["all"]
	fmt.Fprintf(os.Stderr, "Starting a control plane for N=%d clusters, B=%d bundles\n", n, b)
	agentMode := all || want["register"] || want["ready"] || want["retarget"] || want["heartbeat"] || want["dashboard"] || want["sealing"] || want["notify"] || want["commit"] || want["content"]
	cp, audit, err := startControlPlane("bench", auditEnabled && agentMode)
	if err != nil {
		return nil, err
	}
	defer audit.remove()
	defer func() { _ = cp.Stop() }()

	if all || want["agent"] {
		if err := AgentExperiment(ctx, cp, agentOpts); err != nil {
			return nil, fmt.Errorf("agent: %w", err)
		}
		if len(want) == 1 && want["agent"] {
			return nil, nil // the ceilings are the manager's yardstick, not the agent's
		}
	}

	var results []Result
	ceiling := 0.0
	// The ceilings are what every other figure is compared with: always measured.
	{
		r, err := Ceiling(ctx, cp, 32, max(2000, min(n*b, 10000)))
		if err != nil {
			return nil, fmt.Errorf("ceiling: %w", err)
		}
		ceiling = r.Rate
		results = append(results, r)
		printJSON(r)
	}
	crCeiling := 0.0
	{
		r, err := CRCeiling(ctx, cp, 32, max(2000, min(n*b, 10000)))
		if err != nil {
			return nil, fmt.Errorf("cr-ceiling: %w", err)
		}
		crCeiling = r.Rate
		r.CeilingRatio = r.Rate / ceiling
		results = append(results, r)
		printJSON(r)
	}
	floor := 0.0
	var floorResult Result
	if all || want["cr-floor"] || want["ready"] || want["commit"] {
		r, err := CRFloor(ctx, cp, 32, max(2000, min(n*b, 10000)), crCeiling)
		if err != nil {
			return nil, fmt.Errorf("cr-floor: %w", err)
		}
		floor, floorResult = r.Rate, r
		results = append(results, r)
		printJSON(r)
	}
	var commitFloor Result
	if all || want["commit-floor"] || want["commit"] {
		r, err := CommitFloor(ctx, cp, 32, max(2000, min(n*b, 10000)), crCeiling)
		if err != nil {
			return nil, fmt.Errorf("commit-floor: %w", err)
		}
		commitFloor = r
		results = append(results, r)
		printJSON(r)
	}
	if all || want["register-floor"] || want["register"] {
		r, err := RegistrationFloor(ctx, cp, 32, n)
		if err != nil {
			return nil, fmt.Errorf("register-floor: %w", err)
		}
		results = append(results, r)
		printJSON(r)
	}
	if want["notify"] && pprofAddr == "" {
		// The notify experiment reads the manager's CPU profile.
		if pprofAddr, err = framework.FreeAddr(); err != nil {
			return nil, err
		}
	}
	switch {
	case agentMode:
		// Everything after registration needs the agents and their bundles,
		// so register always runs here, and fanout and ready unless only
		// register was asked for.
		f, err := startFleetRun(&fleetRun{cp: cp, n: n, b: b, audit: audit, floor: floor, floorResult: floorResult})
		if err != nil {
			return nil, err
		}
		defer f.mgr.Stop()
		steps := []func(context.Context) error{f.Register}
		if all || want["fanout"] || want["ready"] || want["retarget"] || want["heartbeat"] || want["dashboard"] {
			steps = append(steps, func(ctx context.Context) error { return f.FanoutReady(ctx, ceiling, crCeiling) })
		}
		if all || want["commit"] {
			steps = append(steps, func(ctx context.Context) error { return f.Commit(ctx, commitFloor) })
		}
		if all || want["retarget"] {
			steps = append(steps, f.Retarget)
		}
		if all || want["heartbeat"] {
			steps = append(steps, f.Heartbeat)
		}
		if want["notify"] {
			steps = append(steps, f.Notify)
		}
		if want["content"] {
			steps = append(steps, f.Content)
		}
		if all || want["dashboard"] {
			steps = append(steps, f.Dashboard)
		}
		// Last: its Secrets and bundles stay.
		if all || want["sealing"] {
			steps = append(steps, f.Sealing)
		}
		for _, step := range steps {
			if err := step(ctx); err != nil {
				results = append(results, f.results...)
				_ = printTable(results)
				return nil, fmt.Errorf("%w (manager log: %s)", err, f.mgr.Log)
			}
		}
		results = append(results, f.results...)
	case want["fanout"]:
		r, err := Fanout(ctx, cp, n, b)
		if err != nil {
			return nil, fmt.Errorf("fanout: %w", err)
		}
		r.CeilingRatio = r.Rate / ceiling
		r.CRCeilingRatio = r.Rate / crCeiling
		r.Note = fmt.Sprintf("%.0f%% of the custom-resource ceiling", 100*r.Rate/crCeiling)
		results = append(results, r)
		printJSON(r)
	}
	return results, nil
}

// The monorepo experiment's sizes (flags).
var monorepoApps, monorepoCommits int

// runMonorepo runs the monorepo experiment on a control plane of its own:
// monorepoApps GitRepos against one.
func runMonorepo(ctx context.Context) ([]Result, error) {
	cp, _, err := startControlPlane("bench-monorepo", false)
	if err != nil {
		return nil, err
	}
	defer func() { _ = cp.Stop() }()
	return Monorepo(ctx, cp, monorepoApps, monorepoCommits)
}

func printTable(results []Result) error {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nexperiment\tclusters\tbundles\tobjects\tseconds\trate/s\tof ceiling\tof CR ceiling\tp50 s\tp99 s\twrites/obj\tapiserver CPU ms/obj\tauthz\tmanager RSS MB\tmanager CPU s\tof it metrics\tapiserver+etcd CPU s\tbench CPU s\tetcd objects\tload 1m\tnote")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.2f\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Experiment, r.Clusters, r.Bundles, r.Objects, r.Seconds, r.Rate,
			pct(r.CeilingRatio), pct(r.CRCeilingRatio), num(r.P50), num(r.P99), writesCell(r), num(r.APIServerCPUMsPerBD+r.APIServerCPUMsPerReg+r.APIServerCPUMsPerBeat), pct(r.AuthzShare),
			num(r.ManagerRSSMB), num(r.ManagerCPUS), metricsCell(r), num(r.APIServerCPUS+r.EtcdCPUS), num(r.BenchCPUS), num(r.EtcdObjects), num(r.Load1), r.Note)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range results {
		if len(r.Shares) > 0 {
			fmt.Printf("API server CPU by stack, %s N=%d (%.1f s profiled; shares overlap): %s\n", r.Experiment, r.Clusters, r.ProfileCPUS, sharesText(r.Shares))
		}
		if r.Dashboard != nil {
			fmt.Printf("Dashboard, N=%d B=%d: %s\n", r.Clusters, r.Bundles, r.Note)
		}
		if r.AuditWrites != "" {
			fmt.Printf("Writes by writer, namespace kind, verb and resource, %s N=%d: %s\n", r.Experiment, r.Clusters, r.AuditWrites)
		}
	}
	return printContent(results)
}

// writesCell is the API writes per object of an experiment: per
// registration, per heartbeat (manager and agent), per BundleDeployment.
func writesCell(r Result) string {
	switch {
	case r.WritesPerRegistration > 0:
		return fmt.Sprintf("%.1f", r.WritesPerRegistration)
	case r.ManagerWritesPerBeat != nil && r.AgentWritesPerBeat != nil:
		return fmt.Sprintf("manager %.2f, agent %.2f", *r.ManagerWritesPerBeat, *r.AgentWritesPerBeat)
	case r.APIWritesTotal > 0 && r.Objects > 0:
		return fmt.Sprintf("%.1f", r.APIWritesTotal/float64(r.Objects))
	}
	return "-"
}

func printJSON(r any) {
	b, err := json.Marshal(r)
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: the result %+v cannot be written as JSON: %v\n", r, err)
		return
	}
	fmt.Println(string(b))
}

// metricsCell is the state-metrics handlers' time and its share of the
// manager's CPU, e.g. "0.31 s (1.2%)".
func metricsCell(r Result) string {
	if r.MetricsUpdateS == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f s (%.1f%%)", r.MetricsUpdateS, 100*r.MetricsShare)
}

func pct(f float64) string {
	if f == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", f*100)
}

func num(f float64) string {
	if f == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f", f)
}

func since(t time.Time) float64 { return time.Since(t).Seconds() }
