package registration

// The manager's address, published in every cluster namespace of an agent
// that registered by token (controllers/manageraddress) and followed by the
// agent (agent/registration): when the manager's API server gets a new URL
// or CA, agents learn it through the old address while that still works,
// and switch before it goes away.
const (
	// AddressConfigMap names the ConfigMap of a cluster namespace that holds
	// the address agents reach the manager at.
	AddressConfigMap = "fleet-manager-address"
	// AddressURLKey and AddressCAKey are its keys: the API server's URL and
	// its CA bundle in PEM (empty: the system's roots).
	AddressURLKey = "apiServerURL"
	AddressCAKey  = "apiServerCA"
)
