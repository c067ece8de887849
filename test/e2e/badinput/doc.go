// Package badinput feeds the real system bad input of every kind, one
// table entry per kind, and checks two things each time: that the system says
// clearly what is wrong (a False condition naming the problem, an API
// rejection naming the field, an HTTP error, a CLI error, a refused
// registration), and that nothing else was disturbed: a healthy GitRepo, its
// Bundles and their BundleDeployments, set up before any bad input arrives,
// keep exactly their objects, generations, deploymentIDs and resourceVersions,
// and the manager still fans out a fresh bundle at the end.
//
// Everything is real: a manager control plane with the manager's controllers
// (its webhook server included), a downstream control plane
// registered with the `fleet` CLI and running the `fleet-agent` binary, git
// repositories served over HTTP on loopback, a Helm chart repository on
// loopback, and the `fleet` CLI.
//
// BadInputSpec takes a context and a function returning its SpecInput, so
// that a suite decides what it runs against; the suite of this directory
// (suite_test.go) runs the manager's controllers in process.
package badinput
