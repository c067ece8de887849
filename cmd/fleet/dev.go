package main

import (
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/test/controlplane"
)

type devOptions struct {
	dir string
}

func newDev() *cobra.Command {
	o := &devOptions{}
	cmd := &cobra.Command{Use: "dev", Short: "Run fleet locally, with real API servers and no Kubernetes cluster"}
	up := &cobra.Command{
		Use:   "up",
		Short: "Start a manager control plane (kube-apiserver and etcd) with the CRDs and run the manager against it, until interrupted",
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runDevUp(cmd, o)
		},
	}
	up.Flags().StringVar(&o.dir, "dir", ".demo", "where the kubeconfig and logs are written")
	cmd.AddCommand(up)
	return cmd
}

func runDevUp(cmd *cobra.Command, o *devOptions) error {
	out := cmd.OutOrStdout()
	dir, err := filepath.Abs(o.dir)
	if err != nil {
		return err
	}
	logFile := filepath.Join(dir, "manager.log")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := os.Create(logFile)
	if err != nil {
		return err
	}
	defer f.Close()
	ctrl.SetLogger(zap.New(zap.WriteTo(f)))

	fmt.Fprintln(out, "Starting the manager's control plane (kube-apiserver and etcd; the first run builds them, about 5 minutes)")
	cp, err := controlplane.Start(controlplane.Options{Name: "manager", Dir: filepath.Join(dir, "manager"), CAPI: true})
	if err != nil {
		return err
	}
	defer func() { _ = cp.Stop() }()

	ctx, cancel := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		errc <- controllers.Run(ctx, cp.Config, controllers.RunOptions{
			Options:     controllers.Options{APIServerURL: cp.Config.Host, APIServerCA: cp.Config.CAData},
			MetricsAddr: "0",
		})
	}()
	fmt.Fprintf(out, `
The manager is running.
  kubeconfig:  %s
  manager log: %s
Try:
  kubectl --kubeconfig %[1]s get clusters,bundles,gitrepos -A
  bin/fleet install agent-token -k %[1]s
Press Ctrl-C to stop.
`, cp.Kubeconfig, logFile)
	select {
	case <-ctx.Done():
		return nil
	case err := <-errc:
		return err
	}
}
