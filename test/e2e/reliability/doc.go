// Package reliability holds end-to-end specs that break the manager on
// purpose: two replicas with leader election where the leader is killed or
// stopped, a manager killed in the middle of a fan-out, and the manager's API
// server and etcd going away under a hundred agents. Everything runs against a
// real API server with the real fleet-manager binary.
//
// Each spec is a function taking a context and a function returning its
// SpecInput, so that a suite decides what it runs against; the suite of this
// directory (suite_test.go) runs them all against one local control plane.
package reliability
