// Package agent runs a fleet agent: it registers its cluster with the manager
// (agent/registration), then keeps pulling: it watches the BundleDeployments of
// its cluster namespace upstream, deploys them, and reports status and a
// heartbeat back. Every connection is made by the agent; it resumes by itself
// after any outage.
package agent
