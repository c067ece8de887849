package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/internal/devenv"
	"github.com/gitfleet/fleet/internal/kubeconfig"
	"github.com/gitfleet/fleet/internal/scheme"
)

type devOptions struct {
	dir, bin, examples  string
	timeout             time.Duration
	workloads           bool
	nodes               int
	noManager, noAgents bool
}

func newDev() *cobra.Command {
	o := &devOptions{}
	cmd := &cobra.Command{Use: "dev", Short: "Run fleet locally, with real API servers and no Kubernetes cluster or Docker"}
	cmd.PersistentFlags().StringVar(&o.dir, "dir", ".demo", "where kubeconfigs, logs and state are kept")
	up := &cobra.Command{
		Use:   "up",
		Short: "Start a manager (its own cluster in fleet-local) and two clusters (edge-1 by token, capi-1 through Cluster API), deploy the examples, print their state",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDevUp(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o)
		},
	}
	cmd.PersistentFlags().StringVar(&o.bin, "bin", "bin", "directory with fleet, fleet-manager, fleet-agent and fleet-agent-deploy (make build)")
	up.Flags().StringVar(&o.examples, "examples", "config/examples", "directory committed into the demo's git repository")
	up.Flags().DurationVar(&o.timeout, "timeout", 5*time.Minute, "give up after this long")
	up.Flags().BoolVar(&o.workloads, "workloads", true,
		"run kube-controller-manager, kube-scheduler and kwok (simulated nodes) beside the API servers of edge-1 and capi-1, "+
			"and deploy the examples' workloads directory; false starts API servers alone")
	up.Flags().IntVar(&o.nodes, "nodes", 1, "simulated nodes per cluster that runs workloads")
	up.Flags().BoolVar(&o.noManager, "no-manager", false,
		"start no manager (`fleet dev manager` runs it in the foreground); needs --no-agents")
	up.Flags().BoolVar(&o.noAgents, "no-agents", false,
		"start no agents and wait for no bundle (`fleet dev agents` runs them in the foreground)")
	manager := &cobra.Command{
		Use:   "manager",
		Short: "Run fleet-manager in the foreground against the control planes `fleet dev up --no-manager --no-agents` started, until interrupted",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDevServe(cmd, o, func(ctx context.Context, d devenv.Options) error {
				return devenv.ServeManager(ctx, d, cmd.OutOrStdout())
			})
		},
	}
	agents := &cobra.Command{
		Use: "agents",
		Short: "Run the agents of the local cluster, edge-1 and capi-1 in the foreground against the running control planes and manager, " +
			"registering edge-1 the first time, until interrupted",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDevServe(cmd, o, devenv.ServeAgents)
		},
	}
	down := &cobra.Command{
		Use:   "down",
		Short: "Stop everything `fleet dev up` started and remove its state",
		RunE:  func(cmd *cobra.Command, _ []string) error { return runDevDown(cmd.OutOrStdout(), o) },
	}
	cmd.AddCommand(up, down, manager, agents)
	return cmd
}

// runDevServe runs one of the foreground commands until it ends or the
// command is interrupted (SIGINT, or SIGTERM as Tilt sends).
func runDevServe(cmd *cobra.Command, o *devOptions, serve func(context.Context, devenv.Options) error) error {
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	bin, err := filepath.Abs(o.bin)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return serve(ctx, devenv.Options{Dir: dir, Bin: bin, Progress: cmd.ErrOrStderr()})
}

func alive(pids []int) bool {
	for _, pid := range pids {
		if syscall.Kill(pid, 0) != nil {
			return false
		}
	}
	return len(pids) > 0
}

// runDevUp prints its progress ("==> " lines) on errOut and the fleet's
// state, once up, on out.
func runDevUp(ctx context.Context, out, errOut io.Writer, o *devOptions) error {
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	if st, err := devenv.ReadState(dir); err == nil {
		if st.Ready && alive(st.PIDs) {
			fmt.Fprintln(out, "The local fleet is already running:")
			return printDev(ctx, out, st)
		}
		fmt.Fprintln(errOut, "==> Cleaning up an earlier, incomplete run")
		devenv.Kill(st.PIDs)
		removeAll(st, dir)
	}
	if o.nodes < 1 {
		return fmt.Errorf("--nodes must be at least 1, not %d", o.nodes)
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	bin, _ := filepath.Abs(o.bin)
	examples, _ := filepath.Abs(o.examples)
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	start := time.Now()
	env, err := devenv.Up(ctx, devenv.Options{Dir: dir, Bin: bin, Examples: examples, Progress: errOut,
		Workloads: o.workloads, Nodes: o.nodes, NoManager: o.noManager, NoAgents: o.noAgents})
	if err != nil {
		return fmt.Errorf("bringing the local fleet up: %w (logs in %s)", err, filepath.Join(dir, "logs"))
	}
	if o.noAgents {
		fmt.Fprintf(errOut, "==> Up in %s; now run `fleet dev manager --dir %s` and `fleet dev agents --dir %s` (the Tilt loop does)\n",
			time.Since(start).Round(time.Second), o.dir, o.dir)
	} else {
		fmt.Fprintf(errOut, "==> Ready in %s\n", time.Since(start).Round(time.Second))
	}
	return printDev(ctx, out, &env.State)
}

func printDev(ctx context.Context, out io.Writer, st *devenv.State) error {
	raw, err := os.ReadFile(st.Kubeconfigs["manager"])
	if err != nil {
		return err
	}
	cfg, err := kubeconfig.ToREST(raw)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	clusters, bundles, err := devenv.ReadStatus(ctx, c)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "WORKSPACE\tCLUSTER\tLABELS\tBUNDLES-READY\tSTATE")
	for _, r := range clusters {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Workspace, r.Name, r.Labels, r.Bundles, r.State)
	}
	fmt.Fprintln(tw, "\nWORKSPACE\tBUNDLE\tCLUSTERS-READY\tSTATE")
	for _, r := range bundles {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", r.Workspace, r.Name, r.Clusters, r.State)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if len(st.Workloads) > 0 {
		const window = 5 * time.Second
		usage, err := devenv.MeasureWorkloads(ctx, st.Workloads, window)
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "\nWhat runs the workloads (this machine has %d cores):\n", runtime.NumCPU())
		if err := devenv.PrintUsage(out, usage, window); err != nil {
			return err
		}
	}
	fmt.Fprintf(out, "\nKubeconfigs:\n")
	for _, name := range []string{"manager", "edge-1", "capi-1"} {
		fmt.Fprintf(out, "  %-8s %s\n", name, st.Kubeconfigs[name])
	}
	if st.DashboardURL != "" {
		fmt.Fprintf(out, "Dashboard: %s\n", st.DashboardURL)
	}
	fmt.Fprintf(out, "Logs: %s\nTry: kubectl --kubeconfig %s get clusters.fleet.cattle.io,bundles.fleet.cattle.io -A\nStop: fleet dev down (make demo-down)\n",
		st.Logs, st.Kubeconfigs["manager"])
	return nil
}

func runDevDown(out io.Writer, o *devOptions) error {
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	st, err := devenv.ReadState(dir)
	if errors.Is(err, os.ErrNotExist) {
		fmt.Fprintln(out, "Nothing to stop: no local fleet in", dir)
		return nil
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "Stopping %d processes\n", len(st.PIDs))
	devenv.Kill(st.PIDs)
	removeAll(st, dir)
	return nil
}

func removeAll(st *devenv.State, dir string) {
	for _, d := range st.TempDirs {
		_ = os.RemoveAll(d)
	}
	_ = os.RemoveAll(dir)
}
