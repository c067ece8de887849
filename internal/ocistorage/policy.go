package ocistorage

import (
	"k8s.io/apimachinery/pkg/types"
)

// DefaultThreshold is the manager's default size above which a bundle's
// content goes to the manager-wide registry, when one is configured: well
// under etcd's 1.5 MiB request limit, and large enough that ordinary
// bundles stay in Contents (one read from the API server, no registry in
// the agent's path).
const DefaultThreshold = 512 << 10

// DefaultMaxBytes is the default largest bundle, in bytes of resources
// (uncompressed), that the manager reads when its content goes to a
// registry: far above etcd's limit, so that the charts OCI storage exists
// for fit, and small enough that a few concurrent syncs of such bundles do
// not exhaust the manager's memory (the agent accepts up to 256 MiB).
const DefaultMaxBytes = 64 << 20

// Default is the manager-wide registry: the content of a bundle above
// Threshold, from a GitRepo whose namespace has no registry of its own, is
// pushed there, below Reference + "/" + the bundle's namespace.
type Default struct {
	// Secret is an OCI storage Secret (in the manager's namespace); unset,
	// there is no manager-wide registry.
	Secret types.NamespacedName
	// Threshold is the manifest size in bytes above which a bundle goes to
	// the registry; 0 is DefaultThreshold.
	Threshold int
	// MaxBytes is the largest bundle read when its content goes to a
	// registry (any registry: the GitRepo's own too); 0 is
	// DefaultMaxBytes.
	MaxBytes int
}

// Configured tells whether there is a manager-wide registry.
func (d Default) Configured() bool { return d.Secret.Name != "" }

// Use tells whether a bundle whose manifest is size bytes goes to a
// registry: always when its GitRepo has one (ociRegistrySecret, or its
// namespace's ocistorage Secret: the admin asked for it, as in Fleet);
// otherwise when it is larger than the threshold and the manager has one.
func (d Default) Use(ownRegistry bool, size int) bool {
	if ownRegistry {
		return true
	}
	return d.Configured() && size > d.threshold()
}

func (d Default) threshold() int {
	if d.Threshold <= 0 {
		return DefaultThreshold
	}
	return d.Threshold
}

// ReadLimit is the largest bundle, in bytes of resources (its files,
// uncompressed), that a GitRepo may have, and whether that is the
// registry's limit (MaxBytes). It is when no bundle can land in etcd with
// more than etcd takes: the GitRepo has its own registry (ownRegistry), or
// the manager has one with a threshold under etcdLimit, so that a bundle
// stays in etcd only with a manifest (its files as the Bundle holds them,
// large ones gzipped) under the threshold. Otherwise etcdLimit stays.
func (d Default) ReadLimit(ownRegistry bool, etcdLimit int) (int, bool) {
	if !ownRegistry && (!d.Configured() || d.threshold() >= etcdLimit) {
		return etcdLimit, false
	}
	m := d.MaxBytes
	if m <= 0 {
		m = DefaultMaxBytes
	}
	return max(m, etcdLimit), true
}
