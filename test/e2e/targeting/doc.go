// Package targeting holds end-to-end specs of the manager's chain from
// GitRepo to Bundles to BundleDeployments, against a real API server with
// the manager's controllers running: Bundles reach exactly the clusters their
// targets select, with the options customized per cluster, and status rolls
// up.
//
// Each spec is a function taking a context and a function returning its
// SpecInput, so that a suite decides what it runs against; the suite of this
// directory (suite_test.go) runs them against one local control plane with
// the manager's controllers in process.
package targeting
