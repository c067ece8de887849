// Package cluster keeps each Cluster's namespace (where its BundleDeployments
// live) and its status: the summary of its BundleDeployments, whether its agent
// has checked in, and a Ready condition. Heartbeats alone do not make it work:
// a status-only change of a Cluster is reconciled only when the agent checks
// in for the first time.
package cluster
