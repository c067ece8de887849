// Package clusterregistrationtoken reconciles ClusterRegistrationTokens.
//
// A token is the right to register clusters into one workspace namespace. For
// each token the manager keeps a ServiceAccount whose only permissions are to
// create ClusterRegistrations in that namespace and get them by name (never
// list or watch: the grant in a registration's status is sealed to the
// requesting agent's key), and a Secret
// (status.secretName) whose `values` key holds what an agent needs: the
// manager's URL and CA, the ServiceAccount's bearer token and the namespaces
// to use. When the TTL runs out the token is deleted; its finalizer deletes the
// ServiceAccount, which revokes the bearer token at once.
//
// Files: clusterregistrationtoken_controller.go (setup and the Reconcile
// skeleton: one status patch at the end, when the status changed),
// clusterregistrationtoken_phases.go (the ServiceAccount and RBAC, the values
// Secret, revocation) and clusterregistrationtoken_status.go (the status as
// a pure function of what the phases did). The token's lifetime rule
// (registration.TokenExpiry) lives in internal/registration, shared with the
// import controller, which mints tokens of its own.
package clusterregistrationtoken
