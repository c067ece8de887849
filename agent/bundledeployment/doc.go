// Package bundledeployment holds the agent's BundleDeployment reconciler: it
// watches the BundleDeployments of the agent's cluster namespace on the
// manager's API server, deploys each one into the agent's own cluster with
// agent/deployer, checks the deployed objects with agent/monitor, corrects
// drift when asked to, and patches the BundleDeployment's status, the only
// part of it the agent writes.
//
// Reconcile is a skeleton (bundledeployment_controller.go) over ordered
// phases (bundledeployment_phases.go); the status is computed once, by pure
// functions (bundledeployment_status.go), and patched once. A deployment the
// bundle's author must fix (files that make no chart, a chart that does not
// render, an object the API server rejects) is an outcome.Stalling error: the
// Deployed and Ready conditions turn False with its reason and the reconciler
// stops until the BundleDeployment changes (or the resync looks again);
// other errors back off. The agent records no Events: its credential may
// not write them upstream.
//
// The agent may not update BundleDeployments, so it cannot hold finalizers:
// when a BundleDeployment is gone (a delete event, or on start and every
// resync), the reconciler removes the releases recorded downstream whose
// BundleDeployment no longer exists (collectGarbage).
package bundledeployment
