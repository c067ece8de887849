// Package content counts the BundleDeployments that reference each Content
// (from the cache's index, by the deployments' content-name label) and
// deletes Contents nothing has referenced for a grace period. The count in
// status.referenceCount is informative (collection reads the index): it is
// written once it stops moving, or a minute at most while a rollout moves
// it. The bundle controller creates Contents (internal/content encodes
// them); the agent reads them.
package content
