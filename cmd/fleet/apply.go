package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/kubeconfig"
	"github.com/gitfleet/fleet/internal/scheme"
)

type applyOptions struct {
	readOptions
	output     string
	kubeconfig string
	timeout    time.Duration
}

func newApply() *cobra.Command {
	o := &applyOptions{}
	cmd := &cobra.Command{
		Use:   "apply NAME [PATH...]",
		Short: "Turn directories into Bundles and create or update them, or print them with -o",
		Long: `Reads each PATH (default ".", relative to the current directory; a glob such as "charts/*"
stands for every directory it matches) the way a GitRepo's paths are read: every directory with a
fleet.yaml is a bundle, and so is the path itself when it, or a sub-directory not below a fleet.yaml,
holds a .yaml or .yml file. Bundles are named after NAME and their directory (NAME=examples,
PATH=single-cluster/helm gives examples-single-cluster-helm) unless fleet.yaml names them.

With --driven-scan each PATH is one bundle, "DIR" or "DIR:OPTIONS" (OPTIONS a fleet.yaml under any
name, relative to DIR), as a GitRepo's spec.bundles: nothing below DIR is searched for other bundles.

With -o FILE or -o - the Bundles are written as YAML and no cluster is needed; otherwise they are created
or updated on the cluster of the kubeconfig (-k, $KUBECONFIG or ~/.kube/config).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runApply(cmd.Context(), cmd.OutOrStdout(), cmd.ErrOrStderr(), o, args[0], args[1:])
		},
	}
	f := cmd.Flags()
	o.addFlags(f)
	f.StringToStringVarP(&o.labels, "label", "l", nil, "label of the Bundles, k=v (repeatable)")
	f.StringVarP(&o.output, "output", "o", "", `write the Bundles as YAML to this file ("-" for standard output) instead of applying them`)
	f.StringVarP(&o.kubeconfig, "kubeconfig", "k", "", "kubeconfig of the manager's cluster (default $KUBECONFIG or ~/.kube/config)")
	f.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long fetching charts and talking to the cluster may take")
	return cmd
}

// runApply reads the bundles and applies or writes them; warnings about
// fleet.yaml files (fields ignored, as Fleet ignores them) go to errOut, one
// "warning: " line each, and do not fail the command.
func runApply(ctx context.Context, out, errOut io.Writer, o *applyOptions, name string, paths []string) (err error) {
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	bundles, err := o.read(ctx, errOut, name, paths)
	if err != nil {
		return err
	}

	switch o.output {
	case "":
		return applyBundles(ctx, out, errOut, o.kubeconfig, bundles)
	case "-":
		return writeObjects(out, objects(bundles)...)
	default:
		var buf bytes.Buffer
		if err := writeObjects(&buf, objects(bundles)...); err != nil {
			return err
		}
		// The file is the manifest the user asked for, to read, commit or
		// kubectl apply like any other; it is as private as the user's umask makes it.
		return os.WriteFile(o.output, buf.Bytes(), 0o644) //nolint:gosec // G306: output file the user named on the command line, not private state
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// orDot is the paths as given, "." when none are.
func orDot(paths []string) []string {
	if len(paths) == 0 {
		return []string{"."}
	}
	return paths
}

// applyBundles creates the Bundles, or updates the spec and labels of those
// that exist, printing one line per bundle.
func applyBundles(ctx context.Context, out, errOut io.Writer, kubeconfigPath string, bundles []*fleet.Bundle) error {
	cfg, err := kubeconfig.Load(kubeconfigPath)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	fmt.Fprintf(errOut, "==> Applying %d %s to %s\n", len(bundles), plural(len(bundles), "bundle"), cfg.Host)
	for _, b := range bundles {
		result, err := applyBundle(ctx, c, b)
		if meta.IsNoMatchError(err) || discovery.IsGroupDiscoveryFailedError(err) {
			return fmt.Errorf("the cluster of the kubeconfig does not serve fleet.cattle.io Bundles: install the manager first (fleet install controller): %w", err)
		}
		if err != nil {
			return fmt.Errorf("bundle %s/%s: %w", b.Namespace, b.Name, err)
		}
		if _, err := fmt.Fprintf(out, "bundle %s/%s %s\n", b.Namespace, b.Name, result); err != nil {
			return err
		}
	}
	return nil
}

func applyBundle(ctx context.Context, c client.Client, want *fleet.Bundle) (string, error) {
	result := "unchanged"
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		have := &fleet.Bundle{}
		err := c.Get(ctx, client.ObjectKeyFromObject(want), have)
		if apierrors.IsNotFound(err) {
			result = "created"
			return c.Create(ctx, want.DeepCopy())
		}
		if err != nil {
			return err
		}
		if owner := metav1.GetControllerOf(have); owner != nil && owner.Kind == "GitRepo" {
			// The GitRepo would put its own spec back only at its next commit:
			// until then the cluster would run what was applied by hand.
			return fmt.Errorf("the Bundle is written by GitRepo %s: change it in git, or apply under another NAME", owner.Name)
		}
		if equality.Semantic.DeepEqual(have.Spec, want.Spec) && equality.Semantic.DeepEqual(have.Labels, want.Labels) {
			result = "unchanged"
			return nil
		}
		have.Spec = want.Spec
		have.Labels = want.Labels
		result = "configured"
		return c.Update(ctx, have)
	})
	return result, err
}
