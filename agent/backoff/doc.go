// Package backoff is the one retry helper of the agent's loops: the
// registration that waits for a manager (agent/join), the check-in and the
// credential's rotation (Repeat), the BundleDeployment controller started
// again after it stopped, and the upstream watch resumed after a network
// cut. Each waits capped, jittered, exponentially growing times between
// attempts, so that thousands of agents coming back after one outage spread
// out rather than arrive at once.
package backoff
