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
//
// and nothing else: not even tokens for itself. The manager issues its next
// token before the current one is due, into a Secret of the cluster
// namespace (renewal.go).
//
// The credential is the token of a ServiceAccount made for the registration
// in the agents' namespace (AgentNamespace, fleet-agents-system), which the
// manager owns: one ClusterRoleBinding to that namespace's ServiceAccount
// group grants every agent Contents, and one RoleBinding in the cluster
// namespace, to the shared ClusterRole fleet-agent, the rest. Nothing is
// granted per agent at cluster scope or in the workspace namespace, where the
// API server's authorizer would weigh it on every request of every agent.
//
// The credential is handed over sealed (internal/registration.Seal) to the
// ephemeral X25519 key the agent put in spec.publicKey, in the status write
// that grants the request: the registering token may get registrations by
// name (never list or watch them), and anyone reading another's sees only
// ciphertext. Nothing is written for the token itself: a grant is the
// namespace, the Cluster, the ServiceAccount, its RoleBinding, its token and
// the one status write. The granted registration stays, as the record of the
// grant whose deletion revokes the credential (its finalizer); its ciphertext
// cannot be opened once the agent has dropped its key. A newer registration of the same identity
// replaces the older one, whose ServiceAccount (and so whose credential) is
// deleted with it; deleting the Cluster deletes its agents' ServiceAccounts
// (controllers/cluster).
//
// Condition Accepted says what became of a request: True (Granted), False
// with the reason and what to do when it is refused (InvalidRegistration,
// TokenNotFound, IdentityConflict). The agent logs a refusal; it is for the
// person wondering why a cluster does not appear.
//
// Files: clusterregistration_controller.go (setup and the Reconcile skeleton,
// with the one status patch at the end), clusterregistration_phases.go (the
// checks, the grant and revocation), clusterregistration_status.go (the
// status as pure functions of how a reconcile ended), rbac.go (the shared
// ClusterRoles and the helpers that write RBAC), renewal.go (the agent's next
// token), rotation.go (what earlier versions granted for rotation, revoked
// with their registrations).
package clusterregistration
