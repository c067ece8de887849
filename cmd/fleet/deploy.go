package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/deployer"
	"github.com/gitfleet/fleet/agent/kinds"
	"github.com/gitfleet/fleet/internal/kubeconfig"
)

type deployOptions struct {
	testOptions
	dryRun           bool
	downstream       string
	clusterNamespace string
}

func newDeploy() *cobra.Command {
	o := &deployOptions{}
	cmd := &cobra.Command{Use: "deploy [DIR]", Args: cobra.MaximumNArgs(1),
		Short: "Deploy one bundle's content for a cluster into a cluster, as its agent would, for debugging"}
	cmd.Long = `Reads the bundle of DIR (or -b), matches it to one cluster as "fleet test" does (-N, -l, -g, -L, -t,
--clusters, -k) and installs or upgrades its Helm release in the cluster of --downstream-kubeconfig
through the agent's deploy code (agent/deployer, what fleet-agent-deploy runs), with the rights of
that kubeconfig. --dry-run prints the objects instead and touches no cluster. The release is marked
as deployed from --cluster-namespace, as an agent marks its own: an agent whose cluster namespace
that is takes it over at its next deployment.`
	to := &o.testOptions
	to.addFlags(cmd)
	f := cmd.Flags()
	f.StringVarP(&to.file, "file", "f", "", "the bundle's fleet.yaml under another name, relative to DIR")
	f.StringVarP(&to.clusterName, "name", "N", "", "cluster name to match against (with --clusters or -k: the Cluster to use)")
	f.StringToStringVarP(&to.clusterLabels, "label", "l", nil, "cluster labels to match against, k=v")
	f.StringVarP(&to.group, "group", "g", "", "cluster group to match against")
	f.StringToStringVarP(&to.groupLabels, "group-label", "L", nil, "cluster group labels to match against, k=v")
	f.StringVarP(&to.target, "target", "t", "", "use this target's options, whatever matches")
	f.StringVarP(&to.clusters.kubeconfig, "kubeconfig", "k", "", "kubeconfig of the manager's cluster: take the cluster -N from there")
	f.StringVar(&to.clusters.file, "clusters", "", "take the cluster -N from this YAML file of Clusters, ClusterGroups, BundleNamespaceMappings and Namespaces")
	f.DurationVar(&to.timeout, "timeout", 5*time.Minute, "how long fetching charts and deploying may take")
	f.BoolVar(&o.dryRun, "dry-run", false, "print the objects, deploy nothing")
	f.StringVar(&o.downstream, "downstream-kubeconfig", "", "kubeconfig of the cluster to deploy into (default $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&o.clusterNamespace, "cluster-namespace", "fleet-cli", "the cluster namespace the release is marked as deployed from")
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		return runDeploy(cmd, o, args)
	}
	return cmd
}

func runDeploy(cmd *cobra.Command, o *deployOptions, args []string) error {
	ctx := cmd.Context()
	if len(args) > 1 {
		return fmt.Errorf("give one DIR")
	}
	dir := "."
	if len(args) > 0 {
		dir = args[0]
	}
	var paths []string
	if o.bundleFile == "" {
		o.drivenScan = true
		p := dir
		if o.file != "" {
			p = dir + o.drivenScanSep + o.file
		}
		paths = []string{p}
	}
	bundles, err := o.bundles(ctx, cmd, paths)
	if err != nil {
		return err
	}
	if len(bundles) != 1 {
		return fmt.Errorf("%d bundles read: fleet deploy deploys one, give its DIR", len(bundles))
	}
	fromCluster := cmd.Flags().Changed("clusters") || cmd.Flags().Changed("kubeconfig")
	d, b, err := o.match(ctx, bundles[0], fromCluster)
	if err != nil {
		return fmt.Errorf("bundle %s/%s: %w", bundles[0].Namespace, bundles[0].Name, err)
	}
	files, err := deployer.FilesOf(b.Spec.Resources)
	if err != nil {
		return err
	}
	in := deployer.Input{Name: b.Name, DeploymentID: d.ID, Options: *d.Options, Files: files}
	if o.dryRun {
		objs, err := deployer.Render(ctx, in, deployer.OfflineScope)
		if err != nil {
			return err
		}
		out := make([]runtime.Object, 0, len(objs))
		for _, u := range objs {
			out = append(out, u)
		}
		return writeObjects(cmd.OutOrStdout(), out...)
	}
	cfg, err := kubeconfig.Load(o.downstream)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: kinds.Scheme()})
	if err != nil {
		return err
	}
	dep, err := deployer.New(cfg, c, o.clusterNamespace)
	if err != nil {
		return err
	}
	rel, err := dep.Deploy(ctx, in)
	if err != nil {
		return fmt.Errorf("bundle %s/%s: %w", b.Namespace, b.Name, err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "deployed release %s/%s version %d (deploymentID %s)\n", rel.Namespace, rel.Name, rel.Version, d.ID)
	return nil
}
