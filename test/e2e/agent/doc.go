// Package agent holds the end-to-end specs of the agent: a manager control
// plane with the manager's controllers, two downstream control planes
// registered with the real `fleet` CLI, each running the real `fleet-agent`
// binary as a process. Bundles go in upstream; objects, statuses and drift
// are checked on both sides, also across an outage of the manager's API
// server, a cut link and a crash of an agent in the middle of an install.
//
// AgentSpec takes a context and a function returning its SpecInput, so that
// a suite decides what it runs against; the suite of this directory
// (suite_test.go) starts local control planes and the manager's controllers
// in process.
package agent
