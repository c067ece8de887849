package devenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/internal/localcluster"
	"github.com/gitfleet/fleet/internal/scheme"
)

// Load returns the environment `fleet dev up` left in o.Dir, for the serve
// commands: its control planes keep running in their own processes, and
// what Load's Env starts dies with this process.
func Load(o Options) (*Env, error) {
	st, err := ReadState(o.Dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("no local fleet in %s: run `fleet dev up --dir %s --no-manager --no-agents` first", o.Dir, o.Dir)
	}
	if err != nil {
		return nil, err
	}
	o.Workloads = st.RunsWorkloads
	e := &Env{opts: o, State: *st, serving: true}
	cfg, err := restConfig(st.Kubeconfigs["manager"])
	if err != nil {
		return nil, fmt.Errorf("the manager's kubeconfig: %w: run `fleet dev down --dir %s` and `fleet dev up` again", err, o.Dir)
	}
	if e.Client, err = client.New(cfg, client.Options{Scheme: scheme.New()}); err != nil {
		return nil, err
	}
	return e, nil
}

// ServeManager runs fleet-manager in the foreground against the manager's
// control plane of the environment in o.Dir, with the flags Up gives it,
// its output on out, until ctx ends (then it stops it with SIGTERM) or it
// exits. It is `fleet dev manager`, which the Tilt loop restarts when the
// manager's sources change while the control planes keep running.
func ServeManager(ctx context.Context, o Options, out io.Writer) error {
	e, err := Load(o)
	if err != nil {
		return err
	}
	probe, err := localcluster.FreeAddr()
	if err != nil {
		return err
	}
	args, err := e.managerArgs(probe)
	if err != nil {
		return err
	}
	path := filepath.Join(o.Bin, "fleet-manager")
	cmd := exec.CommandContext(ctx, path, args...) //nolint:gosec // G204: the project's own fleet-manager, from Options.Bin.
	cmd.Stdout, cmd.Stderr = out, out
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 10 * time.Second
	e.stepf("Running %s against %s (health probes on %s)", path, e.State.Kubeconfigs["manager"], probe)
	err = cmd.Run()
	if ctx.Err() != nil {
		return nil //nolint:nilerr // ctx ending is how the caller stops the manager: its exit status then says nothing.
	}
	if err != nil {
		return fmt.Errorf("fleet-manager: %w (run `make build` or pass --bin when %s is missing)", err, path)
	}
	return errors.New("fleet-manager exited")
}

// ServeAgents runs the agents of the environment in o.Dir (the local
// cluster's, edge-1's and capi-1's) as processes of this one, until ctx
// ends or one of them exits. It does first what only the agents' side of Up
// does: it registers edge-1 by token the first time, and waits for the
// manager to install the local cluster's and capi-1's agents. It is `fleet
// dev agents`, which the Tilt loop restarts when the agent's sources change
// while the control planes and the manager keep running. Each agent's log
// is in the logs directory.
func ServeAgents(ctx context.Context, o Options) error {
	e, err := Load(o)
	if err != nil {
		return err
	}
	defer e.Down()
	phases := []func(context.Context) error{e.startLocalAgent}
	if !e.State.EdgeRegistered {
		phases = append(phases, e.registerEdge, func(context.Context) error { return e.save() })
	}
	phases = append(phases, e.startEdgeAgent, e.startCAPIAgent)
	for _, phase := range phases {
		if err := phase(ctx); err != nil {
			return err
		}
	}
	e.stepf("Agents running (logs: %s); waiting until every cluster and every bundle are Ready", e.State.Logs)
	ready := make(chan error, 1)
	go func() { ready <- e.waitReady(ctx) }()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err := <-ready:
			if err != nil && ctx.Err() == nil {
				e.stepf("Not every bundle is Ready yet: %v", err)
			} else if err == nil {
				e.stepf("Every cluster and every bundle are Ready")
			}
		case <-tick.C:
			for _, p := range e.procs {
				if p.Exited() {
					return fmt.Errorf("%s exited; its log %s ends with:\n%s", p.Name, p.Log, p.Tail(4000))
				}
			}
		}
	}
}
