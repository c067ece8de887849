package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/gitfleet/fleet/internal/dashboard"
	"github.com/gitfleet/fleet/internal/kubeconfig"
)

// dashboardOptions are the flags of `fleet dashboard`.
type dashboardOptions struct {
	kubeconfig string
	address    string
	workspaces []string
	urlFile    string
}

func newDashboard() *cobra.Command {
	o := &dashboardOptions{}
	cmd := &cobra.Command{
		Use:   "dashboard",
		Short: "Serve the read-only web dashboard on 127.0.0.1 with your kubeconfig's rights, and print its URL",
		Long: `Serve the read-only web dashboard on this machine, reading with your kubeconfig's own rights: it shows
what kubectl would show you, installs nothing, and follows changes live. The URL it prints carries a one-time
secret that logs your browser in; without it the dashboard is refused.

Where you may not list a kind in every namespace, name the workspaces you may read with --workspace
(default: your kubeconfig context's namespace).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return runDashboard(cmd, o) },
	}
	f := cmd.Flags()
	f.StringVar(&o.kubeconfig, "kubeconfig", "", "kubeconfig of the manager's cluster (default: $KUBECONFIG, ~/.kube/config)")
	f.StringVar(&o.address, "address", "127.0.0.1:0", "address to serve on (default: a free port on loopback)")
	f.StringSliceVar(&o.workspaces, "workspace", nil, "workspaces to read when you may not list everywhere (default: the context's namespace)")
	f.StringVar(&o.urlFile, "url-file", "", "also write the URL to this file (mode 0600), for scripts such as `fleet dev up`")
	return cmd
}

func runDashboard(cmd *cobra.Command, o *dashboardOptions) error {
	cfg, err := kubeconfig.Load(o.kubeconfig)
	if err != nil {
		return err
	}
	ws := o.workspaces
	if len(ws) == 0 {
		rules := clientcmd.NewDefaultClientConfigLoadingRules()
		rules.ExplicitPath = o.kubeconfig
		if ns, overridden, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).Namespace(); err == nil && (overridden || ns != "default") {
			ws = []string{ns}
		}
	}
	ctx := ctrl.SetupSignalHandler()
	l, err := dashboard.StartLocal(ctx, dashboard.LocalOptions{Config: cfg, Workspaces: ws, Address: o.address})
	if err != nil {
		return err
	}
	if o.urlFile != "" {
		if err := os.WriteFile(o.urlFile, []byte(l.URL+"\n"), 0o600); err != nil {
			return err
		}
	}
	fmt.Fprintf(cmd.OutOrStdout(), "Dashboard: %s\n(read-only, with your kubeconfig's rights; Ctrl-C stops it)\n", l.URL)
	return l.Serve(ctx)
}
