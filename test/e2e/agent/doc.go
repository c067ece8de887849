// Package agent holds the end-to-end specs of the agent: a manager control
// plane with the manager's controllers, two downstream control planes
// registered with the real `fleet` CLI, each running the real `fleet-agent`
// binary as a process. Bundles go in upstream; objects, statuses and drift
// are checked on both sides, also across an outage of the manager's API
// server, a cut link and a crash of an agent in the middle of an install.
//
// FleetRepoSpec deploys a repository laid out Fleet's way, unchanged, to the
// same two clusters (joined again by agents of its own): root manifests, a
// nested fleet.yaml with a local chart and a dependency from a chart
// repository, and per-cluster values from labels, templates and
// targetCustomizations.
//
// AgentSpec takes a context and a function returning its SpecInput, so that
// a suite decides what it runs against; the suite of this directory
// (suite_test.go) starts local control planes and the manager's controllers
// in process.
package agent
