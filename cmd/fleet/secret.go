package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/kubeconfig"
	"github.com/gitfleet/fleet/internal/recipients"
	"github.com/gitfleet/fleet/internal/scheme"
)

type recipientsOptions struct {
	kubeconfig string
	namespace  string
	selector   string
	groups     []string
	format     string
	timeout    time.Duration
}

func newSecret() *cobra.Command {
	cmd := &cobra.Command{Use: "secret", Short: "Work with secrets that only their clusters can read"}
	o := &recipientsOptions{}
	rec := &cobra.Command{
		Use:   "recipients",
		Short: "Print the age recipients of the clusters a selector or ClusterGroup picks, for sops",
		Long: `Prints the age recipient ("age1...") of each cluster that --selector matches or a --group
selects: the public key its agent publishes, with which only that agent can open a SOPS file.
One per line, or comma-joined with --format sops, so that

  sops --encrypt --age "$(fleet secret recipients --selector env=prod --format sops)" -i secret.yaml

encrypts a file for exactly those clusters (sops updatekeys takes them from .sops.yaml). Clusters
picked whose agent has published no key yet are named on stderr (a file encrypted without them
will not open there: encrypt it again, or run sops updatekeys, once they have checked in); the
command fails only when no cluster has a recipient.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runRecipients(cmd, o) },
	}
	f := rec.Flags()
	f.StringVarP(&o.kubeconfig, "kubeconfig", "k", "", "kubeconfig of the manager's cluster (default $KUBECONFIG or ~/.kube/config)")
	f.StringVarP(&o.namespace, "namespace", "n", fleet.DefaultWorkspace, "workspace of the clusters")
	f.StringVarP(&o.selector, "selector", "l", "", "label selector of the clusters (e.g. env=prod)")
	f.StringSliceVar(&o.groups, "group", nil, "a ClusterGroup whose clusters to add (repeatable)")
	f.StringVar(&o.format, "format", "lines", "lines (one recipient per line) or sops (comma-joined, for --age)")
	f.DurationVar(&o.timeout, "timeout", 30*time.Second, "how long talking to the cluster may take")
	cmd.AddCommand(rec)
	return cmd
}

func runRecipients(cmd *cobra.Command, o *recipientsOptions) error {
	if o.format != "lines" && o.format != "sops" {
		return fmt.Errorf("--format %q: use lines or sops", o.format)
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), o.timeout)
	defer cancel()
	cfg, err := kubeconfig.Load(o.kubeconfig)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		return err
	}
	res, err := recipients.List(ctx, c, recipients.Options{Namespace: o.namespace, Selector: o.selector, Groups: o.groups})
	if err != nil {
		return err
	}
	for _, m := range res.Missing {
		fmt.Fprintf(cmd.ErrOrStderr(), "cluster %s/%s has no age recipient yet (%s): it is left out\n", o.namespace, m.Cluster, m.Why)
	}
	rs := res.Strings()
	switch {
	case o.format == "sops" && len(rs) > 0:
		fmt.Fprintln(cmd.OutOrStdout(), strings.Join(rs, ","))
	case o.format == "lines":
		for _, r := range rs {
			fmt.Fprintln(cmd.OutOrStdout(), r)
		}
	}
	if len(rs) == 0 {
		return fmt.Errorf("no cluster of %s picked has an age recipient", o.namespace)
	}
	return nil
}
