// Package clusterregistration grants ClusterRegistrations: it turns an agent's
// request (its identity, a random nonce and the labels it asks for) into a
// Cluster, that Cluster's namespace, and a credential that can do exactly what
// an agent needs and nothing more:
//
//   - in the cluster namespace: get, list and watch BundleDeployments, update
//     and patch their status, get Secrets and ConfigMaps;
//   - cluster-wide: get Contents;
//   - in the Cluster's own namespace: patch the status of its own Cluster only;
//   - in the cluster namespace: create tokens for its own ServiceAccount only,
//     to renew its credential before it expires (rotation.go).
//
// The credential is the token of a ServiceAccount made for the registration; it
// is handed over in a Secret in the system registration namespace that only
// the registering token's ServiceAccount may read, and that is removed a short
// time later. A newer registration of the same identity replaces the older one,
// whose ServiceAccount (and so whose credential) is deleted with it.
//
// Condition Accepted says what became of a request: True (Granted), False
// with the reason and what to do when it is refused (InvalidRegistration,
// TokenNotFound, IdentityConflict), Unknown (PendingBound) while it waits
// behind MaxPending credentials that their agents have not fetched yet. The
// agent cannot read it (its token may only create registrations); it is for
// the person wondering why a cluster does not appear.
//
// Files: clusterregistration_controller.go (setup and the Reconcile skeleton,
// with the one status patch at the end), clusterregistration_phases.go (the
// checks, the grant, expiry and revocation), clusterregistration_status.go
// (the status as pure functions of how a reconcile ended), pending.go (the
// bound on credentials waiting for their agents) and rbac.go (the shared
// ClusterRoles and the helpers that write RBAC), rotation.go (the agent's
// right to renew its own token).
package clusterregistration
