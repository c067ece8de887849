package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/internal/bundlediff"
	"github.com/gitfleet/fleet/internal/diagnose"
	"github.com/gitfleet/fleet/internal/dump"
	"github.com/gitfleet/fleet/internal/kubeconfig"
	"github.com/gitfleet/fleet/internal/scheme"
	"github.com/gitfleet/fleet/internal/version"
)

// stateSource is where the day-2 verbs read the fleet's state: the
// manager's cluster (with the kubeconfig's rights), or a dump archive.
type stateSource struct {
	kubeconfig string
	dumpFile   string
	timeout    time.Duration
}

func (s *stateSource) addFlags(cmd *cobra.Command, offline bool) {
	f := cmd.Flags()
	f.StringVarP(&s.kubeconfig, "kubeconfig", "k", "", "kubeconfig of the manager's cluster (default $KUBECONFIG or ~/.kube/config)")
	f.DurationVar(&s.timeout, "timeout", time.Minute, "how long reading the manager's cluster may take")
	if offline {
		f.StringVar(&s.dumpFile, "dump", "", "read the state from this archive of `fleet dump` instead of the manager's cluster")
	}
}

// errNeedsAttention makes the exit code non-zero without printing more.
var errNeedsAttention = errors.New("")

// load reads the state, narrowed by filter when read from the cluster.
func (s *stateSource) load(ctx context.Context, filter dump.Filter, metricsURL string) (*dump.Archive, error) {
	if s.dumpFile != "" {
		f, err := os.Open(s.dumpFile)
		if err != nil {
			return nil, err
		}
		defer func() { _ = f.Close() }()
		return dump.Read(f, s.dumpFile)
	}
	if s.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, s.timeout)
		defer cancel()
	}
	cfg, err := kubeconfig.Load(s.kubeconfig)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New(clusterv1.AddToScheme)})
	if err != nil {
		return nil, err
	}
	return dump.Collect(ctx, c, dump.Options{Filter: filter, MetricsURL: metricsURL})
}

type dumpOptions struct {
	stateSource
	filter     dump.Filter
	output     string
	metricsURL string
}

func newDump() *cobra.Command {
	o := &dumpOptions{}
	cmd := &cobra.Command{
		Use:   "dump",
		Short: "Write the fleet's state into one archive for a support case",
		Long: `Reads GitRepos, HelmOps, Bundles, BundleDeployments, Clusters, ClusterGroups, registration tokens,
registrations, the agents' check-in Leases, Cluster API's Clusters (metadata, spec.paused and the status'
phase, conditions and initialization) and the events about them from the manager's cluster, with the
rights of the kubeconfig (kinds it may not list are named in the archive and left out), and the manager's
metrics (--metrics-url), into a gzipped tar. Secrets are never read; Bundles' resources and registrations'
sealed credentials are left out. "fleet analyze --dump FILE" and "fleet bundlediff --dump FILE" read it.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := o.load(cmd.Context(), o.filter, o.metricsURL)
			if err != nil {
				return err
			}
			f, err := os.OpenFile(o.output, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
			if err != nil {
				return err
			}
			if err := a.Write(f, version.Get()); err != nil {
				_ = f.Close()
				return fmt.Errorf("%s: %w", o.output, err)
			}
			if err := f.Close(); err != nil {
				return err
			}
			s := &a.Snapshot
			fmt.Fprintf(cmd.ErrOrStderr(), "wrote %s: %d clusters, %d bundles, %d bundledeployments, %d gitrepos, %d events\n",
				o.output, len(s.Clusters), len(s.Bundles), len(s.BundleDeployments), len(s.GitRepos), len(a.Events))
			if len(s.Unreadable) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "not allowed to list, left out: %s\n", strings.Join(s.Unreadable, ", "))
			}
			if len(s.Absent) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "not served by the API server, left out: %s\n", strings.Join(s.Absent, ", "))
			}
			if a.MetricsError != "" {
				fmt.Fprintf(cmd.ErrOrStderr(), "metrics left out: %s\n", a.MetricsError)
			}
			return nil
		},
	}
	o.addFlags(cmd, false)
	f := cmd.Flags()
	f.StringVarP(&o.output, "output", "o", "fleet-dump.tgz", "the archive to write")
	f.StringVarP(&o.filter.Namespace, "namespace", "n", "", "only this workspace (its objects, and the BundleDeployments of its clusters)")
	f.StringVar(&o.filter.GitRepo, "gitrepo", "", "only this GitRepo, its Bundles and BundleDeployments")
	f.StringVar(&o.filter.Bundle, "bundle", "", "only this Bundle and its BundleDeployments")
	f.StringVar(&o.filter.Cluster, "cluster", "", "only this Cluster, its BundleDeployments and their Bundles")
	f.StringVar(&o.metricsURL, "metrics-url", "", "the manager's metrics endpoint (e.g. http://fleet-manager:8080/metrics), added to the archive")
	return cmd
}

type analyzeOptions struct {
	stateSource
	namespace string
	output    string
	diagnose.Options
}

func newAnalyze() *cobra.Command {
	o := &analyzeOptions{}
	cmd := &cobra.Command{
		Use:     "analyze",
		Aliases: []string{"monitor"},
		Short:   "Run the checks an expert would over the fleet and print what needs attention, most urgent first",
		Long: `Checks the fleet's state (from the manager's cluster, with the kubeconfig's rights, or from a
"fleet dump" archive with --dump) for: agents Offline, silent or never checked in; agents on another
version; deployments that failed, wait to be applied, or drifted (Modified); rollouts held by a
partition, and which clusters hold them; dependsOn cycles and waits; options a BundleDeployment
holds that differ from what the manager would render for its cluster now; registration tokens about to
expire; clusters whose agent could not be installed (imported, Cluster API); Cluster API clusters past
their control plane's initialization and not enrolled for longer than --stuck-after, and why; GitRepos whose fetch
failed or that are behind. Each finding says what to do. The exit code is 1 when a finding is a
warning or critical, 0 when the fleet is healthy (info findings only). Checks over kinds the caller
may not read are named as not run.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runAnalyze(cmd, o)
		},
	}
	o.addFlags(cmd, true)
	f := cmd.Flags()
	f.StringVarP(&o.namespace, "namespace", "n", "", "only this workspace")
	f.StringVarP(&o.output, "output", "o", "text", "text or json")
	f.DurationVar(&o.SilentAfter, "silent-after", 5*time.Minute, "an agent whose last check-in is older is silent")
	f.DurationVar(&o.StuckAfter, "stuck-after", 10*time.Minute, "a deployment waiting longer is stuck, a Cluster API cluster initialized and not enrolled longer is reported")
	f.DurationVar(&o.TokenWarning, "token-warning", 24*time.Hour, "report registration tokens expiring within this")
	f.StringVar(&o.AgentImage, "agent-image", "", "the agent image every cluster should run (default: the one most clusters run)")
	return cmd
}

func runAnalyze(cmd *cobra.Command, o *analyzeOptions) error {
	if o.output != "text" && o.output != "json" {
		return fmt.Errorf("--output %q: give text or json", o.output)
	}
	a, err := o.load(cmd.Context(), dump.Filter{Namespace: o.namespace}, "")
	if err != nil {
		return err
	}
	findings, skipped := diagnose.Analyze(&a.Snapshot, o.Options)
	out := cmd.OutOrStdout()
	if o.output == "json" {
		data, err := json.MarshalIndent(map[string]any{"taken": a.Snapshot.Taken, "findings": findings, "notRun": skipped}, "", "  ")
		if err != nil {
			return err
		}
		fmt.Fprintln(out, string(data))
	} else {
		for _, f := range findings {
			fmt.Fprintln(out, f.String())
		}
		for _, s := range skipped {
			fmt.Fprintf(out, "[not run] %s\n", s)
		}
		if len(findings) == 0 {
			fmt.Fprintf(out, "No findings: %d clusters, %d bundles, %d bundledeployments, %d gitrepos checked\n",
				len(a.Snapshot.Clusters), len(a.Snapshot.Bundles), len(a.Snapshot.BundleDeployments), len(a.Snapshot.GitRepos))
		}
	}
	if diagnose.NeedsAttention(findings) {
		cmd.SilenceErrors = true
		return errNeedsAttention
	}
	return nil
}

type bundlediffOptions struct {
	stateSource
	sel       bundlediff.Selector
	fleetYAML bool
}

func newBundleDiff() *cobra.Command {
	o := &bundlediffOptions{}
	cmd := &cobra.Command{
		Use:   "bundlediff",
		Short: "Show the drift agents reported on deployed objects, and the comparePatches that would ignore it",
		Long: `Prints, for the BundleDeployments of a bundle (--bundle, -n its workspace), of a cluster (--cluster) or one
(--bundle-deployment NAMESPACE/NAME), each object the agent found modified, missing or extra, and for a
modified one each changed field with the bundle's value. --fleet-yaml prints instead, per bundle, the
diff.comparePatches to put in its fleet.yaml so that the drift is ignored. Reads the manager's cluster,
or a "fleet dump" archive (--dump). Exits 1 when nothing selected has drifted.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runBundleDiff(cmd, o)
		},
	}
	o.addFlags(cmd, true)
	f := cmd.Flags()
	f.StringVarP(&o.sel.BundleNamespace, "namespace", "n", "", "the workspace of the bundle or cluster")
	f.StringVarP(&o.sel.Bundle, "bundle", "b", "", "the bundle's name")
	f.StringVarP(&o.sel.Cluster, "cluster", "c", "", "the cluster's name")
	f.StringVar(&o.sel.BundleDeployment, "bundle-deployment", "", "one BundleDeployment, NAMESPACE/NAME")
	f.BoolVar(&o.fleetYAML, "fleet-yaml", false, "print the fleet.yaml diff.comparePatches that ignore the drift")
	return cmd
}

func runBundleDiff(cmd *cobra.Command, o *bundlediffOptions) error {
	if o.sel.BundleDeployment != "" && !strings.Contains(o.sel.BundleDeployment, "/") {
		return fmt.Errorf("--bundle-deployment %q: give NAMESPACE/NAME", o.sel.BundleDeployment)
	}
	a, err := o.load(cmd.Context(), dump.Filter{Namespace: o.sel.BundleNamespace, Bundle: o.sel.Bundle, Cluster: o.sel.Cluster}, "")
	if err != nil {
		return err
	}
	bds := bundlediff.Drifted(a.Snapshot.BundleDeployments, o.sel)
	if len(bds) == 0 {
		fmt.Fprintln(cmd.ErrOrStderr(), "no drift reported on the BundleDeployments selected")
		cmd.SilenceErrors = true
		return errNeedsAttention
	}
	if !o.fleetYAML {
		return bundlediff.Print(cmd.OutOrStdout(), bds)
	}
	patches, err := bundlediff.ComparePatches(bds)
	if err != nil {
		return err
	}
	return bundlediff.PrintFleetYAML(cmd.OutOrStdout(), patches)
}
