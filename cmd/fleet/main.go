// Command fleet is the command line of the fleet GitOps manager: it installs
// the manager and agents and writes bundles.
package main

import (
	"errors"
	"os"

	"github.com/spf13/cobra"

	"github.com/gitfleet/fleet/internal/version"
)

func main() {
	if err := newRoot().Execute(); err != nil {
		var e exitError
		if errors.As(err, &e) {
			os.Exit(e.code)
		}
		os.Exit(1)
	}
}

func newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "fleet",
		Short:         "GitOps for fleets of Kubernetes clusters",
		SilenceUsage:  true,
		SilenceErrors: false,
		// --version; `make build` stamps it, a plain go build reports the commit.
		Version: version.Get(),
	}
	root.AddCommand(newInstall(), newApply(), newTarget(), newTest(), newDev(), newDashboard(),
		newAnalyze(), newDump(), newBundleDiff(), newPreview(), newCleanup(), newDeploy(), newSecret())
	return root
}
