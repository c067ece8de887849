// Package cluster keeps each Cluster's namespace (where its BundleDeployments
// live) and its status: the summary of its BundleDeployments, whether its agent
// has checked in, and a Ready condition.
//
// The agent checks in by renewing a Lease (fleet.AgentLeaseName) in its cluster
// namespace. The controller folds it into status.agent only when something
// shown changes (foldCheckIn: the first check-in, the return of an Offline
// cluster, lastSeen older than LastSeenRefresh, the agent's namespace), and
// computes Offline from the Lease itself (internal/checkin): a steady
// heartbeat costs a cache read and no write. Before it shows a cluster
// Offline, it reads the Lease once more from the API server
// (confirmOffline): a cache lagging behind the last renewal raises no false
// alarm. Deleting a Cluster deletes its
// namespace and its agents' ServiceAccounts, revoking their credentials.
//
// The summary of a Cluster's deployments is written at most once per
// SummaryInterval, a change of it only once it has lasted that long, and
// while a rollout is under way on the cluster (deployments staged or not yet
// applied) once it lands or SummaryHold has passed (summaryWait): a commit
// to a thousand clusters that lands on each within SummaryHold costs their
// Clusters no write (Ready before, Ready after), not one per step of its
// deployments.
package cluster
