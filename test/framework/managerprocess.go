package framework

import (
	"context"

	"github.com/gitfleet/fleet/internal/localcluster"
)

// DefaultReadyTimeout bounds how long StartManagerProcess waits for the
// manager to be ready (localcluster.DefaultReadyTimeout).
const DefaultReadyTimeout = localcluster.DefaultReadyTimeout

// FreeAddr returns a loopback address with a port nobody listens on at the
// moment of the call (localcluster.FreeAddr).
func FreeAddr() (string, error) { return localcluster.FreeAddr() }

// StartManagerProcess starts the fleet-manager binary with args, logging to
// dir/logName.log, serving its health probes on a free loopback port, and
// returns once GET /readyz answers 200: its cache has synced, so the
// namespaces it creates exist. On failure the process is killed and the error
// holds the tail of its log.
func StartManagerProcess(dir, logName string, args ...string) (*Process, error) {
	return StartManagerProcessEnv(dir, logName, nil, args...)
}

// StartManagerProcessEnv is StartManagerProcess with env ("NAME=value")
// added to this process's environment, e.g. the GOMEMLIMIT a Deployment's
// memory limit would give it.
func StartManagerProcessEnv(dir, logName string, env []string, args ...string) (*Process, error) {
	addr, err := FreeAddr()
	if err != nil {
		return nil, err
	}
	bin, err := Binary("fleet-manager")
	if err != nil {
		return nil, err
	}
	p, err := localcluster.StartFile(dir, logName, bin, env, append(args, "--health-probe-bind-address", addr)...)
	if err != nil {
		return nil, err
	}
	if err := p.WaitReady(context.Background(), "http://"+addr+"/readyz", DefaultReadyTimeout); err != nil {
		p.Kill()
		return nil, err
	}
	return p, nil
}
