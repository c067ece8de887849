package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/kubeconfig"
	"github.com/gitfleet/fleet/internal/preview"
	"github.com/gitfleet/fleet/internal/scheme"
)

type previewOptions struct {
	readOptions
	repo     string
	name     string
	from, to string
	output   string
	clusters clusterSource
	timeout  time.Duration
}

// exitError ends the command with its code and no message.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

func newPreview() *cobra.Command {
	o := &previewOptions{}
	cmd := &cobra.Command{
		Use:   "preview [PATH...]",
		Short: "Show what a change of a repository does to each targeted cluster",
		Long: `Reads the bundles of PATHs (default: the whole repository) of the git repository --repo at two
revisions (--from, default HEAD; --to, default the working tree), as the manager reads a GitRepo
named --name in namespace -n (with -k, when that GitRepo exists, with its targets, paths and bundle
options, as the manager reads it), targets both at the clusters of the manager (-k) or of a file
(--clusters, for CI without cluster access) with the manager's targeting, renders each
cluster's deployment as its agent would, and prints, per cluster, the bundles added, removed
or changed and, per object, the fields that change. --output markdown writes a pull request
comment, json a document for tools. Exit code: 0 nothing changes, 2 something changes, 1 an
error (a fleet.yaml that does not parse, a revision that does not exist, a bad cluster file).`,
		RunE: func(cmd *cobra.Command, args []string) error {
			return runPreview(cmd, o, args)
		},
	}
	f := cmd.Flags()
	o.addFlags(f)
	f.StringVar(&o.repo, "repo", ".", "the git repository")
	f.StringVar(&o.name, "name", "preview", "the GitRepo's name: bundles are named after it, as the manager names them")
	f.StringVar(&o.from, "from", "HEAD", "the revision deployed now")
	f.StringVar(&o.to, "to", "", "the revision to preview (default: the working tree of --repo)")
	f.StringVarP(&o.output, "output", "o", preview.Text, "text, markdown or json")
	f.StringVarP(&o.clusters.kubeconfig, "kubeconfig", "k", "", "kubeconfig of the manager's cluster, whose Clusters and ClusterGroups are read")
	f.StringVar(&o.clusters.file, "clusters", "", "read Clusters, ClusterGroups, BundleNamespaceMappings and Namespaces from this YAML file instead of the manager")
	f.DurationVar(&o.timeout, "timeout", 5*time.Minute, "how long fetching charts and talking to the cluster may take")
	return cmd
}

// readAt reads the bundles at revision ("" the working tree).
func (o *previewOptions) readAt(ctx context.Context, cmd *cobra.Command, revision string, paths []string) ([]*fleet.Bundle, string, error) {
	root, label := o.repo, "working tree"
	if revision != "" {
		dir, err := os.MkdirTemp("", "fleet-preview-")
		if err != nil {
			return nil, "", err
		}
		defer func() { _ = os.RemoveAll(dir) }()
		hash, err := preview.Checkout(o.repo, revision, dir)
		if err != nil {
			return nil, "", err
		}
		root, label = dir, revision+" ("+hash[:12]+")"
	}
	cwd, err := os.Getwd()
	if err != nil {
		return nil, "", err
	}
	if err := os.Chdir(root); err != nil {
		return nil, "", err
	}
	defer func() { _ = os.Chdir(cwd) }()
	ro := o.readOptions
	bundles, err := ro.read(ctx, cmd.ErrOrStderr(), o.name, paths)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", label, err)
	}
	return bundles, label, nil
}

func runPreview(cmd *cobra.Command, o *previewOptions, paths []string) error {
	ctx := cmd.Context()
	if o.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, o.timeout)
		defer cancel()
	}
	if o.output != preview.Text && o.output != preview.Markdown && o.output != preview.JSON {
		return fmt.Errorf("--output %q: give text, markdown or json", o.output)
	}
	if o.labels == nil {
		o.labels = map[string]string{}
	}
	o.labels[fleet.RepoLabel] = o.name
	if o.targetsFile != "" {
		// Read from each revision's checkout, the working directory then:
		// the path is the caller's.
		abs, err := filepath.Abs(o.targetsFile)
		if err != nil {
			return err
		}
		o.targetsFile = abs
	}
	in, err := o.clusters.load(ctx)
	if err != nil {
		return err
	}
	if o.clusters.file == "" {
		if o.gitRepo, err = gitRepoOf(ctx, o.clusters.kubeconfig, o.namespace, o.name); err != nil {
			return err
		}
		if o.gitRepo != nil {
			fmt.Fprintf(cmd.ErrOrStderr(), "==> Reading as GitRepo %s/%s does (its targets and bundle options)\n", o.namespace, o.name)
			if len(paths) == 0 {
				paths = o.gitRepo.Spec.Paths
			}
		}
	}
	from, fromLabel, err := o.readAt(ctx, cmd, o.from, paths)
	if err != nil {
		return err
	}
	to, toLabel, err := o.readAt(ctx, cmd, o.to, paths)
	if err != nil {
		return err
	}
	r, err := preview.Compute(ctx, from, to, in, nil)
	if err != nil {
		return err
	}
	r.From, r.To = fromLabel, toLabel
	if err := preview.Write(cmd.OutOrStdout(), r, o.output); err != nil {
		return err
	}
	if len(r.Errors) > 0 {
		return fmt.Errorf("%d cluster(s) could not be previewed (listed above)", len(r.Errors))
	}
	if r.Changes() {
		cmd.SilenceErrors = true
		return exitError{code: 2}
	}
	return nil
}

// gitRepoOf reads GitRepo namespace/name from the manager; nil when there
// is none, or the caller may not read it (then --targets-file gives the
// targets).
func gitRepoOf(ctx context.Context, kubeconfigPath, namespace, name string) (*fleet.GitRepo, error) {
	cfg, err := kubeconfig.Load(kubeconfigPath)
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return nil, err
	}
	g := &fleet.GitRepo{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, g); err != nil {
		if apierrors.IsNotFound(err) || apierrors.IsForbidden(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading GitRepo %s/%s: %w", namespace, name, err)
	}
	return g, nil
}
