// Package controller holds the agent's BundleDeployment reconciler: it
// watches the BundleDeployments of the agent's cluster namespace on the
// manager's API server, deploys each one into the agent's own cluster with
// agent/deployer, checks the deployed objects with agent/monitor, corrects
// drift when asked to, and patches the BundleDeployment's status, the only
// part of it the agent writes.
//
// The agent may not update BundleDeployments, so it cannot hold finalizers:
// when a BundleDeployment is gone (a delete event, or on start and every
// resync), the reconciler removes the releases recorded downstream whose
// BundleDeployment no longer exists (collectGarbage).
package controller
