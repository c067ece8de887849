// Package monitor tells how a BundleDeployment's deployed objects are doing:
// whether each is ready (ready.go), whether it still matches the manifest it
// was deployed from (diff.go, honouring diff.comparePatches, Fleet's
// {"op": "ignore"} included), and sums this up
// into the BundleDeployment's status fields (status.go). These are pure
// functions of the desired and live objects, table-tested without a cluster.
//
// Watcher (watcher.go) keeps one label-filtered dynamic informer per kind the
// agent's releases deploy, in the agent's own cluster, so that a change,
// deletion or extra object reaches the BundleDeployment's status within
// seconds, and so that checking status reads from memory instead of the API
// server.
package monitor
