// Package clusterregistration grants ClusterRegistrations: it turns an agent's
// request (its identity, a random nonce and the labels it asks for) into a
// Cluster, that Cluster's namespace, and a credential that can do exactly what
// an agent needs and nothing more:
//
//   - in the cluster namespace: get, list and watch BundleDeployments, update
//     and patch their status, get Secrets and ConfigMaps, and keep its
//     check-in Lease (fleet.AgentLeaseName), which the cluster controller
//     folds into the Cluster's status;
//   - cluster-wide: get Contents;
//   - in the agents' namespace: create tokens for its own ServiceAccount
//     only, to renew its credential before it expires (rotation.go).
//
// The credential is the token of a ServiceAccount made for the registration
// in the agents' namespace (AgentNamespace, fleet-agents-system), which the
// manager owns: one ClusterRoleBinding to that namespace's ServiceAccount
// group grants every agent Contents, and one RoleBinding in the cluster
// namespace, to the shared ClusterRole fleet-agent, the rest. Nothing is
// granted per agent at cluster scope or in the workspace namespace, where the
// API server's authorizer would weigh it on every request of every agent. The
// credential is handed over in a Secret in the system registration namespace
// that only the registering token's ServiceAccount may read, and that is
// removed a short time later. A newer registration of the same identity
// replaces the older one, whose ServiceAccount (and so whose credential) is
// deleted with it; deleting the Cluster deletes its agents' ServiceAccounts
// (controllers/cluster).
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
