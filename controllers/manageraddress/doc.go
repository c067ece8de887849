// Package manageraddress publishes the address agents reach the manager at
// (the manager's --api-server-url and --api-server-ca-file) in the cluster
// namespace of every Cluster that registered by token: the ConfigMap
// fleet-manager-address (keys apiServerURL, apiServerCA), which the agent's
// credential may read. An agent compares it with the address it uses and,
// once the manager accepts its credential at the published address, switches
// to it (agent/upstream.Follow). So a manager moved to a new URL, or
// given a new serving CA, is followed by every agent while the old address
// still works, without a new registration token.
//
// Clusters with spec.kubeConfigSecret are left out: the import controller
// hands their agents the address (the Secret's own apiServerURL/apiServerCA
// keys, else the manager's) and reinstalls them when it changes.
//
// A Cluster whose agent was told the current address with its credential at
// registration (annotation registration.AddressAnnotation) gets no ConfigMap
// until the address changes: one write fewer per registration.
//
// Every Cluster is looked at when the controller starts (which is when a
// changed flag takes effect) and when it gets its cluster namespace;
// heartbeats and other status changes do not wake it. The ConfigMap is read
// uncached, so the manager keeps no ConfigMaps in memory, and written only
// when it differs. It carries fleet.cattle.io/managed; one without it is not
// overwritten (AddressNotOwned is logged): fleet never adopts an object it
// did not make.
package manageraddress
