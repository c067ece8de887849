// Package sharding splits the manager's work among several managers on one
// management cluster, as Fleet does: a manager started with a shard ID
// handles only the GitRepos, HelmOps, Bundles and BundleDeployments
// labelled fleet.cattle.io/shard-ref with that ID; the manager of the
// default shard (no ID) handles those without the label and does the work
// that belongs to no shard (Clusters, registration, imports, Cluster API).
// An object labelled with a shard no manager serves is handled by none.
//
// It gives the controllers the test (Owns), the event filter (Predicate),
// the cache selectors of a sharded manager (CacheByObject) and the
// per-shard leader election ID, and checks a shard ID (Validate).
package sharding
