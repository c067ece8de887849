// Package bundle targets Bundles at Clusters: for every Cluster a Bundle's
// targets select, it writes one BundleDeployment into the cluster's namespace,
// holding the deploymentID (the Content with the bundle's resources plus the
// hash of the options customized for that cluster). It removes the
// BundleDeployments of clusters no longer targeted, rolls out changes within
// rolloutStrategy.maxUnavailable, and summarizes the BundleDeployments' states
// in the Bundle's status.
//
// Targeting is event-driven: a Cluster change enqueues only the Bundles that
// target it now or did before; heartbeats (status-only changes) enqueue
// nothing. Target selectors are compiled once per Bundle generation. A
// deployment's status change recounts and replans against the targets of the
// last full pass, which runs again only when something that targeting reads
// changed or the plan wants a write.
//
// A bundle in OCI storage (spec.contentsId) has no Content: next to each of
// its BundleDeployments the controller writes the Secret its agent pulls the
// content with (oci.go). A HelmOp's bundle (spec.helmOpOptions, Fleet's
// field) has none either: its BundleDeployments carry helmChartOptions and
// the agents download the chart, whose versions must be exact; next to each
// BundleDeployment goes the copy of the HelmOp's helmSecretName Secret, under
// the BundleDeployment's name, owned by it and deleted with it (helmops.go).
// The agent's per-cluster rights let it read only its own cluster
// namespace's copies.
//
// Files: bundle_controller.go (setup, the Reconcile skeleton, deletion),
// bundle_phases.go and content.go (the steps of a full pass), bundle_pass.go
// (the status pass), bundle_rollout.go (the rollout plan), bundle_status.go
// (the status, as pure functions), bundle_watches.go (what events enqueue)
// and memory.go (all the controller keeps between reconciles).
package bundle
