// Package downstreamresource seals, for every BundleDeployment whose
// options name downstreamResources (Fleet's HelmOp spec.downstreamResources
// and fleet.yaml downstreamResources), the Secrets and ConfigMaps named to
// the key of the agent that deploys it, into the BundleDeployment's
// spec.sealedResources (internal/sealing). The agent opens them and creates
// them in its cluster before the release.
//
// The plain values are read from the source's namespace uncached, by name,
// only when something changed: the controller hears of the sources through
// metadata-only watches, and seals again a BundleDeployment only when one
// of its own sources (uid and resourceVersion), the set of missing sources,
// or its agent's key (the check-in Lease's fleet.SealingKeyAnnotation)
// changed. A change to one source therefore seals again only for the
// clusters whose BundleDeployments use it. The bundle controller leaves
// spec.sealedResources as it finds it; this controller writes nothing else.
package downstreamresource
