// Package registration holds the end-to-end specs of token registration and
// per-cluster security: a manager control plane, two downstream control
// planes, the real `fleet` CLI and the real `fleet-agent` binary.
//
// TokenRegistrationSpec takes a context and a function returning its
// SpecInput, so that a suite decides what it runs against; the suite of this
// directory (suite_test.go) starts local control planes and the manager's
// controllers in process.
package registration
