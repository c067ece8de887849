package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gitfleet/fleet/agent/deployer"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/content"
	"github.com/gitfleet/fleet/internal/target"
)

type testOptions struct {
	bundleInput
	// file is fleet.yaml under another name, relative to the bundle
	// directory (Fleet's -f).
	file          string
	quiet         bool
	clusterName   string
	clusterLabels map[string]string
	group         string
	groupLabels   map[string]string
	target        string
	clusters      clusterSource
	timeout       time.Duration
}

func newTest() *cobra.Command {
	o := &testOptions{}
	cmd := &cobra.Command{
		Use:   "test [DIR]",
		Short: "Match a bundle to a cluster and print the resources that cluster would get",
		Long: `Reads the bundle of DIR (default ".") or of a Bundle file (-b), matches it against one cluster
and prints, as YAML, the objects the agent would deploy there: the Helm chart (or manifests,
or kustomization) rendered with the options of the matching targets and the Helm values
templated for that cluster, as the manager and the agent would, without any cluster.

The cluster is described by -N, -l, -g and -L (a cluster that belongs to group "default" when
none of -g, -l, -L or -t is given, as in Fleet), or, with --clusters FILE or -k KUBECONFIG, it
is the Cluster named -N among those of the file or the manager, with its own labels, groups,
annotations and templateValues. -t TARGET takes that target's options whatever matches.
helm.valuesFrom is not read: it names objects of the downstream cluster.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTest(cmd, o, args)
		},
	}
	o.addFlags(cmd)
	f := cmd.Flags()
	f.StringVarP(&o.file, "file", "f", "", "the bundle's fleet.yaml under another name, relative to DIR")
	f.BoolVarP(&o.quiet, "quiet", "q", false, "print only the match, not the resources")
	f.StringVarP(&o.clusterName, "name", "N", "", "cluster name to match against (with --clusters or -k: the Cluster to use)")
	f.StringToStringVarP(&o.clusterLabels, "label", "l", nil, "cluster labels to match against, k=v")
	f.StringVarP(&o.group, "group", "g", "", "cluster group to match against")
	f.StringToStringVarP(&o.groupLabels, "group-label", "L", nil, "cluster group labels to match against, k=v")
	f.StringVarP(&o.target, "target", "t", "", "use this target's options, whatever matches")
	f.StringVarP(&o.clusters.kubeconfig, "kubeconfig", "k", "", "kubeconfig of the manager's cluster: take the cluster -N from there")
	f.StringVar(&o.clusters.file, "clusters", "", "take the cluster -N from this YAML file of Clusters, ClusterGroups, BundleNamespaceMappings and Namespaces")
	f.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long fetching charts and talking to the cluster may take")
	return cmd
}

func runTest(cmd *cobra.Command, o *testOptions, args []string) error {
	ctx := cmd.Context()
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	dir := "."
	if len(args) > 0 {
		dir = args[0]
	}
	var bundles []*fleet.Bundle
	var err error
	switch {
	case o.bundleFile != "" && (len(args) > 0 || o.file != ""):
		return fmt.Errorf("give either --bundle-file or DIR (and -f), not both")
	case o.bundleFile != "":
		bundles, err = o.bundles(ctx, cmd, nil)
	default:
		// DIR is one bundle, as in Fleet: nothing below it is searched.
		o.drivenScan = true
		path := dir
		if o.file != "" {
			path = dir + o.drivenScanSep + o.file
		}
		bundles, err = o.bundles(ctx, cmd, []string{path})
	}
	if err != nil {
		return err
	}
	fromCluster := cmd.Flags().Changed("clusters") || cmd.Flags().Changed("kubeconfig")
	for _, b := range bundles {
		if err := testBundle(ctx, cmd, o, b, fromCluster); err != nil {
			return fmt.Errorf("bundle %s/%s: %w", b.Namespace, b.Name, err)
		}
	}
	return nil
}

// testBundle matches b against the cluster of o and prints what it would
// get.
// match targets b at the one cluster of o, as the manager would.
func (o *testOptions) match(ctx context.Context, b *fleet.Bundle, fromCluster bool) (*target.Deployment, *fleet.Bundle, error) {
	var in target.Inputs
	var err error
	if fromCluster {
		if o.clusterName == "" {
			return nil, nil, fmt.Errorf("-N: name the Cluster to use among those of %s", describeSource(o.clusters))
		}
		if in, err = o.clusters.load(ctx); err != nil {
			return nil, nil, err
		}
		var found *fleet.Cluster
		for _, c := range in.Clusters {
			if c.Name == o.clusterName && c.Namespace == b.Namespace {
				found = c
			}
		}
		if found == nil {
			return nil, nil, fmt.Errorf("no Cluster %s in namespace %s among those of %s", o.clusterName, b.Namespace, describeSource(o.clusters))
		}
		in.Clusters = []*fleet.Cluster{found}
	} else {
		in = o.syntheticCluster(b.Namespace)
	}
	if o.target != "" {
		if b, err = onlyTarget(b, o.target, in.Clusters[0].Name); err != nil {
			return nil, nil, err
		}
	}
	name, _, err := content.Encode(b.Spec.Resources)
	if err != nil {
		return nil, nil, err
	}
	ds, errs, err := target.Deployments(b, name, in)
	if err != nil {
		return nil, nil, err
	}
	if len(errs) > 0 {
		return nil, nil, errs[0]
	}
	if len(ds) == 0 {
		return nil, nil, fmt.Errorf("no match found: no target of the bundle selects cluster %s", in.Clusters[0].Name)
	}
	return ds[0], b, nil
}

func testBundle(ctx context.Context, cmd *cobra.Command, o *testOptions, b *fleet.Bundle, fromCluster bool) error {
	d, b, err := o.match(ctx, b, fromCluster)
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "# Matched: %s\n", strings.Join(d.Targets, ", "))
	if o.quiet {
		return nil
	}
	if d.Options.Helm != nil && len(d.Options.Helm.ValuesFrom) > 0 {
		fmt.Fprintf(cmd.ErrOrStderr(), "warning: helm.valuesFrom is not read: it names objects of the downstream cluster\n")
	}
	files, err := deployer.FilesOf(b.Spec.Resources)
	if err != nil {
		return err
	}
	objs, err := deployer.Render(ctx, deployer.Input{Name: b.Name, DeploymentID: d.ID, Options: *d.Options, Files: files}, deployer.OfflineScope)
	if err != nil {
		return err
	}
	out := make([]runtime.Object, 0, len(objs))
	for _, u := range objs {
		out = append(out, u)
	}
	return writeObjects(cmd.OutOrStdout(), out...)
}

// syntheticCluster is the cluster -N, -l, -g and -L describe, in the
// bundle's namespace, with its group (which selects it).
func (o *testOptions) syntheticCluster(ns string) target.Inputs {
	name := o.clusterName
	if name == "" {
		name = "test"
	}
	group := o.group
	if group == "" && len(o.clusterLabels) == 0 && len(o.groupLabels) == 0 && o.target == "" {
		group = "default" // as Fleet's fleet test
	}
	in := target.Inputs{Clusters: []*fleet.Cluster{{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: o.clusterLabels}}}}
	if group != "" || len(o.groupLabels) > 0 {
		in.Groups = []*fleet.ClusterGroup{{
			ObjectMeta: metav1.ObjectMeta{Name: group, Namespace: ns, Labels: o.groupLabels},
			Spec:       fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{}},
		}}
	}
	return in
}

// onlyTarget is b with just the target name, made to select cluster, and
// no restrictions: its options apply whatever matches.
func onlyTarget(b *fleet.Bundle, name, cluster string) (*fleet.Bundle, error) {
	var names []string
	for _, t := range b.Spec.Targets {
		if t.Name != name {
			names = append(names, t.Name)
			continue
		}
		b = b.DeepCopy()
		t.ClusterName, t.ClusterSelector, t.ClusterGroup, t.ClusterGroupSelector, t.DoNotDeploy = cluster, nil, "", nil, false
		b.Spec.Targets, b.Spec.TargetRestrictions = []fleet.BundleTarget{t}, nil
		return b, nil
	}
	slices.Sort(names)
	return nil, fmt.Errorf("-t: the bundle has no target %q; its targets: %s", name, strings.Join(names, ", "))
}

func describeSource(s clusterSource) string {
	if s.file != "" {
		return s.file
	}
	return "the manager's cluster"
}
