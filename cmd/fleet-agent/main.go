// Command fleet-agent runs the fleet agent of one cluster.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"k8s.io/apimachinery/pkg/api/resource"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gitfleet/fleet/agent"
	"github.com/gitfleet/fleet/agent/deployrpc"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/kubeconfig"
	"github.com/gitfleet/fleet/internal/version"
)

func main() {
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(agent.DefaultGCPercent)
	}
	o := agent.Options{}
	var kubeconfigPath, deployMemory string
	cmd := &cobra.Command{
		Use:          "fleet-agent",
		Short:        "Run the fleet agent: register this cluster, then pull and deploy its BundleDeployments",
		SilenceUsage: true,
		Version:      version.Get(),
		RunE: func(cmd *cobra.Command, _ []string) error {
			agent.SampleHeap(o.DebugAddress != "")
			ctrl.SetLogger(zap.New())
			cfg, err := kubeconfig.Load(kubeconfigPath)
			if err != nil {
				return err
			}
			o.Local = cfg
			if err := deployBounds(cmd.Flags(), &o, deployMemory); err != nil {
				return err
			}
			return agent.Run(ctrl.SetupSignalHandler(), o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&kubeconfigPath, "kubeconfig", "", "kubeconfig of this (the agent's own) cluster (default: in-cluster, $KUBECONFIG, ~/.kube/config)")
	f.StringVar(&o.Namespace, "namespace", fleet.DefaultSystemNamespace, "the agent's system namespace in this cluster")
	f.DurationVar(&o.CheckinInterval, "checkin-interval", 0, "how often to report to the manager (default 15m)")
	f.DurationVar(&o.MinBackoff, "min-backoff", 0, "first wait after a failed connection (default 1s)")
	f.DurationVar(&o.MaxBackoff, "max-backoff", 0, "longest wait between retries (default 1m)")
	f.DurationVar(&o.Resync, "resync", 0, "how often every BundleDeployment is checked again without an event (default 5m; changes downstream are seen at once)")
	f.IntVar(&o.Workers, "workers", 0, "number of BundleDeployments deployed at once (default 4)")
	f.BoolVar(&o.LeaderElect, "leader-elect", false, "work only while holding the fleet-agent Lease in the system namespace (one of several replicas)")
	f.DurationVar(&o.LeaseDuration, "leader-elect-lease-duration", 0, "leader lease duration (default 15s)")
	f.DurationVar(&o.RotateCredentialBefore, "rotate-credential-before", 0,
		"renew the credential when less than this remains of its lifetime (default a third of its lifetime)")
	f.DurationVar(&o.BootstrapCheckInterval, "bootstrap-check-interval", 0,
		"how often to look for a new bootstrap secret placed while the agent runs, to register with it (default 15s)")
	f.DurationVar(&o.AddressCheckInterval, "manager-address-check-interval", 0,
		"how often to read the address the manager publishes for its agents, to follow it when it moves (default 15m)")
	f.StringVar(&o.DeployBinary, "deploy-binary", deployrpc.BinaryName,
		"the binary that installs, upgrades and uninstalls releases, one process per operation: a path, or a name looked up beside fleet-agent, then in $PATH")
	f.IntVar(&o.DeployConcurrency, "deploy-concurrency", deployrpc.DefaultConcurrency,
		"deploy binaries running at once (each holds Helm in memory while it runs: more deploy faster, at a higher peak memory)")
	f.DurationVar(&o.DeployTimeout, "deploy-timeout", deployrpc.DefaultTimeout,
		"how long one deploy may run, Helm's wait included, before it is stopped and its bundle reports DeployTimedOut (or $"+deployrpc.TimeoutEnv+")")
	f.StringVar(&deployMemory, "deploy-memory-limit", resource.NewQuantity(deployrpc.DefaultMemoryLimit, resource.BinarySI).String(),
		"how much memory one deploy may map before it is stopped and its bundle reports DeployOutOfMemory (or $"+deployrpc.MemoryLimitEnv+")")
	f.StringVar(&o.ChartCacheDir, "chart-cache-dir", filepath.Join(os.TempDir(), "fleet-agent-charts"),
		"where the charts of HelmOps downloaded by this agent are kept, to deploy them again without downloading (bounded to 32 charts and 128 MiB; empty keeps none)")
	f.StringVar(&o.DebugAddress, "debug-bind-address", "", "serve Go profiles (/debug/pprof/) and metrics (/metrics) at this address, e.g. 127.0.0.1:6060 (default off)")
	if err := cmd.Execute(); err != nil {
		os.Exit(1)
	}
}

// deployBounds sets the bounds of each deploy from the flags, or from the
// environment (which a Cluster's agentEnvVars set) when the flags are not
// given.
func deployBounds(f *pflag.FlagSet, o *agent.Options, memory string) error {
	if v := os.Getenv(deployrpc.TimeoutEnv); v != "" && !f.Changed("deploy-timeout") {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return fmt.Errorf("%s=%q is not a positive duration", deployrpc.TimeoutEnv, v)
		}
		o.DeployTimeout = d
	}
	if v := os.Getenv(deployrpc.MemoryLimitEnv); v != "" && !f.Changed("deploy-memory-limit") {
		memory = v
	}
	limit, err := deployrpc.ParseMemoryLimit(memory)
	if err != nil {
		return fmt.Errorf("--deploy-memory-limit or %s: %w", deployrpc.MemoryLimitEnv, err)
	}
	o.DeployMemoryLimit = limit
	return nil
}
