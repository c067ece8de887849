// Command bench measures the manager at scale against a fresh local control
// plane and prints one JSON line per experiment, then a table for people.
//
//   - ceiling: raw creates/s of small objects with 32 clients, the limit of
//     this API server on this machine;
//   - fanout: N clusters x B bundles (10 KB each): time until N*B
//     BundleDeployments exist, and that rate as a fraction of the ceiling;
//   - agent: one real fleet-agent process (its memory, idle CPU and
//     requests, bandwidth, reconnect and start; agent.go).
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
}

// setMetricsCPU records the state-metrics handlers' time s.
func (r *Result) setMetricsCPU(s float64) {
	r.MetricsUpdateS = s
	if r.ManagerCPUS > 0 {
		r.MetricsShare = s / r.ManagerCPUS
	}
}

func main() {
	clusters := flag.Int("clusters", 1000, "simulated clusters (N)")
	bundles := flag.Int("bundles", 10, "bundles (B)")
	experiments := flag.String("experiments", "all", "comma-separated: ceiling,cr-ceiling,fanout,register,ready,retarget,heartbeat,agent (all = every one)")
	flag.StringVar(&pprofAddr, "pprof", "", "serve the manager's Go profiles at this address (e.g. 127.0.0.1:6060)")
	flag.StringVar(&agentOpts.Binary, "agent-binary", "", "agent experiment: the fleet-agent to measure (default: cmd/fleet-agent built as it ships)")
	flag.DurationVar(&agentOpts.Idle, "agent-idle", 2*time.Minute, "agent experiment: idle window")
	flag.DurationVar(&agentOpts.Checkin, "agent-checkin", time.Minute, "agent experiment: the agent's check-in interval")
	flag.DurationVar(&agentOpts.Resync, "agent-resync", time.Minute, "agent experiment: the agent's resync interval")
	flag.DurationVar(&agentOpts.Settle, "agent-settle", 30*time.Second, "agent experiment: wait before reading memory")
	flag.BoolVar(&agentOpts.HeapProfile, "agent-heap-profile", false,
		"agent experiment: sample the agent's heap to tell what holds it (its function tables then take more pages: not the agent as it ships)")
	flag.DurationVar(&agentOpts.Cut, "agent-cut", 30*time.Second, "agent experiment: how long the link to the manager is cut")
	flag.Parse()
	ctrl.SetLogger(logr.Discard())
	if err := run(*clusters, *bundles, *experiments); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// agentOpts are the agent experiment's flags.
var agentOpts AgentOptions

func run(n, b int, which string) error {
	want := map[string]bool{}
	for _, e := range strings.Split(which, ",") {
		want[strings.TrimSpace(e)] = true
	}
	all := want["all"]
	// Interrupted, it still stops the control plane and the manager.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	fmt.Fprintf(os.Stderr, "Starting a control plane for N=%d clusters, B=%d bundles\n", n, b)
	cp, err := controlplane.Start(controlplane.Options{Name: "bench", APIServerArgs: map[string][]string{
		"max-requests-inflight": {"800"}, "max-mutating-requests-inflight": {"400"},
	}})
	if err != nil {
		return err
	}
	defer func() { _ = cp.Stop() }()
	defer framework.RemoveBinaries()

	if all || want["agent"] {
		if err := AgentExperiment(ctx, cp, agentOpts); err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		if len(want) == 1 && want["agent"] {
			return nil // the ceilings are the manager's yardstick, not the agent's
		}
	}

	var results []Result
	ceiling := 0.0
	// The ceilings are what every other figure is compared with: always measured.
	{
		r, err := Ceiling(ctx, cp, 32, max(2000, min(n*b, 10000)))
		if err != nil {
			return fmt.Errorf("ceiling: %w", err)
		}
		ceiling = r.Rate
		results = append(results, r)
		printJSON(r)
	}
	crCeiling := 0.0
	{
		r, err := CRCeiling(ctx, cp, 32, max(2000, min(n*b, 10000)))
		if err != nil {
			return fmt.Errorf("cr-ceiling: %w", err)
		}
		crCeiling = r.Rate
		r.CeilingRatio = r.Rate / ceiling
		results = append(results, r)
		printJSON(r)
	}
	agentMode := all || want["register"] || want["ready"] || want["retarget"] || want["heartbeat"]
	switch {
	case agentMode:
		// Everything after registration needs the agents and their bundles,
		// so register always runs here, and fanout and ready unless only
		// register was asked for.
		f := &fleetRun{cp: cp, n: n, b: b}
		if f.c, err = newClient(cp.Config); err != nil {
			return err
		}
		if f.mgr, err = startManager(cp); err != nil {
			return err
		}
		defer f.mgr.Stop()
		if err := watchBDs(ctx, f); err != nil {
			return err
		}
		steps := []func(context.Context) error{f.Register}
		if all || want["fanout"] || want["ready"] || want["retarget"] || want["heartbeat"] {
			steps = append(steps, func(ctx context.Context) error { return f.FanoutReady(ctx, ceiling, crCeiling) })
		}
		if all || want["retarget"] {
			steps = append(steps, f.Retarget)
		}
		if all || want["heartbeat"] {
			steps = append(steps, f.Heartbeat)
		}
		for _, step := range steps {
			if err := step(ctx); err != nil {
				results = append(results, f.results...)
				printTable(results)
				return fmt.Errorf("%w (manager log: %s)", err, f.mgr.Log)
			}
		}
		results = append(results, f.results...)
	case want["fanout"]:
		r, err := Fanout(ctx, cp, n, b)
		if err != nil {
			return fmt.Errorf("fanout: %w", err)
		}
		r.CeilingRatio = r.Rate / ceiling
		r.Note = fmt.Sprintf("%.0f%% of the custom-resource ceiling", 100*r.Rate/crCeiling)
		results = append(results, r)
		printJSON(r)
	}
	return printTable(results)
}

func printTable(results []Result) error {
	tw := tabwriter.NewWriter(os.Stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "\nexperiment\tclusters\tbundles\tobjects\tseconds\trate/s\tof ceiling\tp50 s\tp99 s\tmanager RSS MB\tmanager CPU s\tof it metrics\tapiserver+etcd CPU s\tbench CPU s\tnote")
	for _, r := range results {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%.2f\t%.0f\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Experiment, r.Clusters, r.Bundles, r.Objects, r.Seconds, r.Rate,
			pct(r.CeilingRatio), num(r.P50), num(r.P99), num(r.ManagerRSSMB), num(r.ManagerCPUS), metricsCell(r), num(r.APIServerCPUS+r.EtcdCPUS), num(r.BenchCPUS), r.Note)
	}
	return tw.Flush()
}

func printJSON(r any) {
	b, _ := json.Marshal(r)
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
