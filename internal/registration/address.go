package registration

import (
	"crypto/sha256"
	"encoding/hex"
)

// The manager's address, published in every cluster namespace of an agent
// that registered by token (controllers/manageraddress) and followed by the
// agent (agent/upstream.Follow): when the manager's API server gets a new URL
// or CA, agents learn it through the old address while that still works,
// and switch before it goes away.
const (
	// AddressAnnotation, on a Cluster, is AddressHash of the address its
	// agent was told at registration: while the manager's address is that
	// one, it publishes no AddressConfigMap for the Cluster.
	AddressAnnotation = "fleet.cattle.io/registered-manager-address"
	// AddressConfigMap names the ConfigMap of a cluster namespace that holds
	// the address agents reach the manager at.
	AddressConfigMap = "fleet-manager-address"
	// AddressURLKey and AddressCAKey are its keys: the API server's URL and
	// its CA bundle in PEM (empty: the system's roots).
	AddressURLKey = "apiServerURL"
	AddressCAKey  = "apiServerCA"
)

// AddressHash identifies the address url with CA bundle ca.
func AddressHash(url string, ca []byte) string {
	sum := sha256.Sum256(append([]byte(url+"\x00"), ca...))
	return hex.EncodeToString(sum[:16])
}
