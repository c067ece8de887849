package main

import (
	"context"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/cleanup"
	"github.com/gitfleet/fleet/internal/kubeconfig"
	"github.com/gitfleet/fleet/internal/scheme"
)

type cleanupOptions struct {
	kubeconfig   string
	namespace    string
	dryRun       bool
	pendingAfter time.Duration
	timeout      time.Duration
}

func newCleanup() *cobra.Command {
	cmd := &cobra.Command{Use: "cleanup", Short: "Remove objects the fleet is done with"}
	o := &cleanupOptions{}
	reg := &cobra.Command{
		Use:   "clusterregistration",
		Short: "Delete ClusterRegistrations that are done or orphaned",
		Long: `Deletes the ClusterRegistrations superseded by a newer granted registration of the same Cluster, those
whose Cluster no longer exists, and requests never granted older than --pending-after. The newest
granted registration of an existing Cluster is always kept: deleting it would revoke the
credential its agent uses. --dry-run names them without deleting.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runCleanupRegistrations(cmd, o)
		},
	}
	f := reg.Flags()
	f.StringVarP(&o.kubeconfig, "kubeconfig", "k", "", "kubeconfig of the manager's cluster (default $KUBECONFIG or ~/.kube/config)")
	f.StringVarP(&o.namespace, "namespace", "n", "", "only this workspace (default all)")
	f.BoolVar(&o.dryRun, "dry-run", false, "print what would be deleted, delete nothing")
	f.DurationVar(&o.pendingAfter, "pending-after", time.Hour, "delete requests never granted once older than this")
	f.DurationVar(&o.timeout, "timeout", time.Minute, "how long talking to the cluster may take")
	cmd.AddCommand(reg)
	return cmd
}

func runCleanupRegistrations(cmd *cobra.Command, o *cleanupOptions) error {
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
	var opts []client.ListOption
	if o.namespace != "" {
		opts = append(opts, client.InNamespace(o.namespace))
	}
	regs, clusters := &fleet.ClusterRegistrationList{}, &fleet.ClusterList{}
	if err := c.List(ctx, regs, opts...); err != nil {
		return fmt.Errorf("listing ClusterRegistrations: %w", err)
	}
	if err := c.List(ctx, clusters, opts...); err != nil {
		return fmt.Errorf("listing Clusters: %w", err)
	}
	out := cmd.OutOrStdout()
	removals := cleanup.Registrations(regs.Items, clusters.Items, time.Now(), o.pendingAfter)
	for _, r := range removals {
		reg := r.Registration
		if o.dryRun {
			fmt.Fprintf(out, "would delete ClusterRegistration %s/%s: %s\n", reg.Namespace, reg.Name, r.Why)
			continue
		}
		uid := reg.UID
		if err := c.Delete(ctx, reg, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("deleting ClusterRegistration %s/%s: %w", reg.Namespace, reg.Name, err)
		}
		fmt.Fprintf(out, "deleted ClusterRegistration %s/%s: %s\n", reg.Namespace, reg.Name, r.Why)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "%d of %d ClusterRegistrations %s\n", len(removals), len(regs.Items), map[bool]string{true: "to delete", false: "deleted"}[o.dryRun])
	return nil
}
