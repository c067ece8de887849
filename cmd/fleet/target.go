package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/yaml"

	"github.com/gitfleet/fleet/agent/deployer"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/content"
	"github.com/gitfleet/fleet/internal/target"
)

// bundleInput is where `fleet target` and `fleet test` take bundles from:
// directories read as `fleet apply` reads them, or a file of Bundles.
type bundleInput struct {
	readOptions
	name       string
	bundleFile string
}

func (o *bundleInput) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	o.readOptions.addFlags(f)
	f.StringVar(&o.name, "bundle-name", "test", `the bundles read from directories are named after it and their directory, as after NAME by "fleet apply NAME"`)
	f.StringVarP(&o.bundleFile, "bundle-file", "b", "", `read the Bundles from this YAML file (as "fleet apply -o" writes them) instead of directories`)
}

// bundles reads the Bundles. A bundle file's Bundles keep their namespace
// unless -n is given; those without one get the default.
func (o *bundleInput) bundles(ctx context.Context, cmd *cobra.Command, paths []string) ([]*fleet.Bundle, error) {
	if o.bundleFile == "" {
		return o.read(ctx, cmd.ErrOrStderr(), o.name, paths)
	}
	if len(paths) > 0 {
		return nil, fmt.Errorf("give either --bundle-file or PATHs, not both")
	}
	data, err := os.ReadFile(o.bundleFile)
	if err != nil {
		return nil, err
	}
	docs, err := deployer.DecodeDocuments(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.bundleFile, err)
	}
	var out []*fleet.Bundle
	for i, d := range docs {
		u := &unstructured.Unstructured{Object: d}
		if gvk := u.GroupVersionKind(); gvk.Group != fleet.GroupVersion.Group || gvk.Kind != "Bundle" {
			return nil, fmt.Errorf("%s: object %d is a %s %s, not a fleet.cattle.io Bundle", o.bundleFile, i+1, u.GetAPIVersion(), u.GetKind())
		}
		b := &fleet.Bundle{}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructuredWithValidation(d, b, true); err != nil {
			return nil, fmt.Errorf("%s: Bundle %s: %w", o.bundleFile, u.GetName(), err)
		}
		if cmd.Flags().Changed("namespace") || b.Namespace == "" {
			b.Namespace = o.namespace
		}
		out = append(out, b)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s holds no Bundle", o.bundleFile)
	}
	return out, nil
}

type targetOptions struct {
	bundleInput
	clusters      clusterSource
	dumpInputList bool
	timeout       time.Duration
}

func newTarget() *cobra.Command {
	o := &targetOptions{}
	cmd := &cobra.Command{
		Use:   "target [PATH...]",
		Short: "Print the BundleDeployments the manager would write for bundles, without writing anything",
		Long: `Reads bundles from PATHs (as fleet apply reads them, named after --bundle-name) or from a Bundle file
(-b, as fleet apply -o writes it), targets them at the clusters the manager knows (through the
kubeconfig: -k, $KUBECONFIG or ~/.kube/config) or at those of a file (--clusters: Cluster,
ClusterGroup, BundleNamespaceMapping and Namespace objects, for use without a manager), and prints,
as YAML, each bundle's Content and one BundleDeployment per targeted cluster: in its cluster
namespace, with the options the manager would give it (target customizations merged, Helm values
templated for that cluster). Nothing is written. Clusters whose options cannot be worked out are
named on standard error and the command fails after printing the others.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTarget(cmd, o, args)
		},
	}
	o.addFlags(cmd)
	f := cmd.Flags()
	f.StringToStringVar(&o.labels, "label", nil, "label of the Bundles read from PATHs, k=v (repeatable); BundleNamespaceMappings select on them")
	f.StringVarP(&o.clusters.kubeconfig, "kubeconfig", "k", "", "kubeconfig of the manager's cluster, whose Clusters and ClusterGroups are read (default $KUBECONFIG or ~/.kube/config)")
	f.StringVar(&o.clusters.file, "clusters", "", "read Clusters, ClusterGroups, BundleNamespaceMappings and Namespaces from this YAML file instead of the manager")
	f.BoolVarP(&o.dumpInputList, "dump-input-list", "l", false, "also write, to standard error, the targeted clusters as matching saw them (labels, groups, targets)")
	f.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long fetching charts and talking to the cluster may take")
	return cmd
}

func runTarget(cmd *cobra.Command, o *targetOptions, paths []string) error {
	ctx := cmd.Context()
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	bundles, err := o.bundles(ctx, cmd, paths)
	if err != nil {
		return err
	}
	in, err := o.clusters.load(ctx)
	if err != nil {
		return err
	}
	out, errOut := cmd.OutOrStdout(), cmd.ErrOrStderr()
	var failed []error
	for _, b := range bundles {
		name, build, err := content.Encode(b.Spec.Resources)
		if err != nil {
			return err
		}
		c, err := build()
		if err != nil {
			return err
		}
		ds, errs, err := target.Deployments(b, name, in)
		if err != nil {
			return fmt.Errorf("bundle %s/%s: %w", b.Namespace, b.Name, err)
		}
		objs := []runtime.Object{c}
		for _, d := range ds {
			bd := target.BundleDeployment(b, name, d)
			bd.APIVersion, bd.Kind = fleet.GroupVersion.String(), "BundleDeployment"
			objs = append(objs, bd)
		}
		if err := writeObjects(out, objs...); err != nil {
			return err
		}
		fmt.Fprintf(errOut, "# bundle %s/%s targets %d cluster(s)\n", b.Namespace, b.Name, len(ds))
		if o.dumpInputList {
			if err := dumpTargets(errOut, ds); err != nil {
				return err
			}
		}
		for _, e := range errs {
			fmt.Fprintf(errOut, "error: bundle %s/%s: %v\n", b.Namespace, b.Name, e)
			failed = append(failed, fmt.Errorf("bundle %s/%s: %w", b.Namespace, b.Name, e))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%d cluster(s) targeted but not deployable: %w", len(failed), errors.Join(failed...))
	}
	return nil
}

// dumpTargets writes the targeted clusters as matching saw them.
func dumpTargets(w io.Writer, ds []*target.Deployment) error {
	type group struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels,omitempty"`
	}
	type entry struct {
		Cluster          string            `json:"cluster"`
		ClusterNamespace string            `json:"clusterNamespace"`
		Labels           map[string]string `json:"labels,omitempty"`
		Groups           []group           `json:"clusterGroups,omitempty"`
		Targets          []string          `json:"targets"`
	}
	list := make([]entry, 0, len(ds))
	for _, d := range ds {
		e := entry{Cluster: d.Cluster.Namespace + "/" + d.Cluster.Name, ClusterNamespace: d.Namespace, Labels: d.Cluster.Labels, Targets: d.Targets}
		for _, g := range d.Info.Groups {
			e.Groups = append(e.Groups, group{Name: g.Name, Labels: g.Labels})
		}
		list = append(list, e)
	}
	b, err := yaml.Marshal(list)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}
