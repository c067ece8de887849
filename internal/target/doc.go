// Package target decides which clusters get a Bundle and with which options.
// It is the pure core of targeting: no API server, no client, no logging. The
// bundle controller feeds it objects from its caches and writes the results as
// BundleDeployments.
//
// The package is built for a manager that handles thousands of clusters and
// bundles, so the expensive work happens once per object version:
//
//   - Compile turns a Bundle into a CompiledBundle: every label selector of its
//     targets and targetRestrictions is parsed once, and the effective options
//     of each target are merged once. Callers keep the CompiledBundle until the
//     Bundle's UID or generation changes (see CompiledBundle.UpToDate).
//   - CompileGroup and CompileMapping do the same for ClusterGroups and
//     BundleNamespaceMappings.
//   - CompiledBundle.Match is then a handful of map lookups per target and,
//     in the common cases, allocates nothing: it returns a Result shared by
//     every cluster that matched the same targets. Results are read-only.
//
// What a caller does per (bundle, cluster) pair:
//
//  1. AllowedNamespaces says which namespaces' clusters the bundle may target
//     (its own, plus those mapped by BundleNamespaceMappings).
//  2. ClusterInfoFor (or a ClusterInfo built by hand) describes the cluster and
//     the ClusterGroups it belongs to; Match decides whether it is targeted and
//     with which options.
//  3. When DependsOnCluster says the Helm values differ per cluster,
//     RenderHelmValues computes them for that cluster as Fleet does
//     (global.fleet.clusterLabels.<label> values, then, unless
//     helm.disablePreProcess, the ${ } templates of values and
//     helm.templateValues), on a copy of the options, since Results are
//     shared.
//  4. DeploymentID names what the agent must deploy.
//
// A Targeter does steps 2 to 4 for the clusters of one pass, sharing the
// options of clusters that match alike, and BundleDeployment (with
// Unchanged, its in-place comparison) builds what the manager writes. The
// bundle controller calls them over its caches; Deployments calls them over
// plain lists of objects for `fleet target` and `fleet test`, so the
// command line prints exactly what the manager writes.
//
// Which bundles to re-match when a Cluster or ClusterGroup changes (indexing)
// is the caller's business; this package only keeps each match cheap.
package target
