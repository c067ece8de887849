// Package clustergroup keeps ClusterGroup status: how many clusters its
// selector matches, which of them are not ready, and the sum of their bundle
// summaries.
package clustergroup
