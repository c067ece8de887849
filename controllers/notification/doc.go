// Package notification runs the Notification reconciler: it follows the
// rollouts of the GitRepos and HelmOps a Notification selects and tells its
// destination about each rollout's transitions, once.
//
// A rollout is what one commit of a GitRepo (one chart version of a HelmOp)
// does to its clusters. Its state is read from what the manager keeps
// already: the source's status (the commit or version) and its Bundles'
// status (summary counts, the first non-ready clusters with their errors,
// partitions), from the cache; no BundleDeployment is read. The Bundles are
// taken as showing the rollout only once each carries the revision and its
// status is for its current generation, so that the summary of the previous
// commit is never told as this one's.
//
// What was sent is recorded in the Notification's status right after each
// message (a rollout's record is written before its first), and read back
// from the API server (not the cache) before any message is sent, so that a
// manager restarted, or another replica taking the lead, sends nothing
// twice; only a crash between a message and its record sends that message
// again, with the same ID, so that a receiver can tell it is the same. A destination that fails shows in the
// DestinationFailing condition and is retried with backoff; deployments do
// not wait for it.
package notification
