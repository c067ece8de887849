// Command fleet is the command line of the fleet GitOps manager: it installs
// the manager and agents and writes bundles.
package main

import (
	"os"

	"github.com/spf13/cobra"
)

func main() {
	if err := newRoot().Execute(); err != nil {
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "fleet",
		Short:         "GitOps for fleets of Kubernetes clusters",
		SilenceUsage:  true,
		SilenceErrors: false,
	}
	root.AddCommand(newInstall(), newApply(), newTarget(), newTest(), newDev())
	return root
}
