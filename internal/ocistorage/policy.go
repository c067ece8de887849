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
	t := d.Threshold
	if t <= 0 {
		t = DefaultThreshold
	}
	return d.Configured() && size > t
}
