// Package clusterregistration grants ClusterRegistrations: it turns an agent's
// request (its identity, a random nonce and the labels it asks for) into a
// Cluster, that Cluster's namespace, and a credential that can do exactly what
// an agent needs and nothing more:
//
//   - in the cluster namespace: get, list and watch BundleDeployments, update
//     and patch their status, get Secrets and ConfigMaps;
//   - cluster-wide: get Contents;
//   - in the Cluster's own namespace: patch the status of its own Cluster only.
//
// The credential is the token of a ServiceAccount made for the registration; it
// is handed over in a Secret in the system registration namespace that only
// the registering token's ServiceAccount may read, and that is removed a short
// time later. A newer registration of the same identity replaces the older one,
// whose ServiceAccount (and so whose credential) is deleted with it.
package clusterregistration
