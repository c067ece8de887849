// Package dump is `fleet dump`'s archive: the fleet's objects (GitRepos,
// HelmOps, Bundles, BundleDeployments, Clusters, ClusterGroups, registration
// tokens, registrations, the agents' check-in Leases), the events about them
// and the manager's metrics, read with the caller's own rights into one
// gzipped tar for a support case, and read back by `fleet analyze --dump`
// and `fleet bundlediff --dump` as a diagnose.Snapshot. Secrets are never
// read; what could carry a secret in the objects that are (a Bundle's
// resources, a registration's sealed credential) is left out.
package dump
