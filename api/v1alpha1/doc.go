// Package v1alpha1 holds the fleet.cattle.io/v1alpha1 API: the same kinds, field
// names and semantics as Rancher Fleet, so that existing GitRepo manifests,
// fleet.yaml files and tooling work unchanged.
//
// The flow through the kinds: a GitRepo is turned into Bundles (one per bundle
// directory); each Bundle is matched against Clusters (directly, through
// ClusterGroups, or across namespaces through BundleNamespaceMappings) and
// becomes one BundleDeployment per matching cluster, in that cluster's own
// namespace. Bundle resources are stored once, deduplicated, in cluster-scoped
// Content objects that BundleDeployments point at by deploymentID. Agents
// register with a ClusterRegistrationToken by creating a ClusterRegistration,
// then read their BundleDeployments and report status back on them.
// GitRepoRestriction limits what GitRepos in a namespace may use.
//
// The package holds only types and well-known constants; names derived from
// objects (cluster namespaces, content names, deployment IDs) are computed
// elsewhere.
//
// +kubebuilder:object:generate=true
// +groupName=fleet.cattle.io
package v1alpha1
