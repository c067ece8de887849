// Package agent runs a fleet agent: it registers its cluster with the manager
// (agent/join), then keeps pulling: it watches the BundleDeployments of its
// cluster namespace upstream, deploys them, patches their status back, and
// checks in by renewing its Lease there (Heartbeat; the manager, not the
// agent, writes the Cluster's status from it). Every connection is made by
// the agent; it resumes by itself after any outage.
//
// Run wires the parts: the Heartbeat, the credential's Rotator
// (agent/upstream, which also holds the client of the manager's API server
// and the stored credential), and a controller-runtime manager whose cache
// holds only the agent's BundleDeployments, running the BundleDeployment
// reconciler (agent/bundledeployment) over the agent's own cluster
// (agent/downstream: Helm's release records read by agent/release, drift
// correction) and the monitor of the deployed objects (agent/monitor).
// Installs, upgrades and uninstalls run in the fleet-agent-deploy binary,
// one process each (agent/deployrpc, agent/deployer), so that this process
// never links Helm's SDK. Should that manager stop, it is built again after
// a capped backoff; every retry loop of the agent waits through
// agent/backoff.
//
// A run ends, and the next starts from registration, when a new bootstrap
// Secret is placed, when one that failed is waiting while the stored
// credential does not work, or when the manager's published address moved
// (move.go): the agent follows a new or moved manager without a restart,
// and adopts its releases.
package agent
