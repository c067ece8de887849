// Command fleet-agent-deploy installs, upgrades or uninstalls one Helm
// release for the fleet agent, then exits. The agent runs it, one process
// per operation: the request comes as JSON on standard input, the response
// goes as JSON to standard output, the log to standard error (see
// agent/deployrpc). It is not meant to be run by hand.
package main

import (
	"fmt"
	"os"

	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/gitfleet/fleet/agent/deployer"
	"github.com/gitfleet/fleet/internal/version"
)

func main() {
	if len(os.Args) > 1 {
		if os.Args[1] == "--version" || os.Args[1] == "version" {
			fmt.Println(version.Get())
			return
		}
		fmt.Fprintln(os.Stderr, "fleet-agent-deploy takes no arguments: the fleet agent runs it with a request on standard input")
		os.Exit(2)
	}
	log := zap.New(zap.WriteTo(os.Stderr))
	ctrl.SetLogger(log)
	ctx := ctrl.LoggerInto(ctrl.SetupSignalHandler(), log)
	if err := deployer.Serve(ctx, os.Stdin, os.Stdout); err != nil {
		log.Error(err, "fleet-agent-deploy failed")
		os.Exit(1)
	}
}
