// Package registration is the agent's side of joining a fleet. From the
// fleet-agent-bootstrap Secret (a registration token) and the fleet-agent
// ConfigMap (labels, optional identity) in its own cluster, it creates a
// ClusterRegistration upstream, waits for the manager to grant it, stores the
// credential it receives in the fleet-agent Secret and deletes the bootstrap
// Secret, so the cluster keeps no token.
//
// On every start a stored credential that still works is reused; one the
// manager rejects is replaced by registering again, as soon as a bootstrap
// Secret is present. An unreachable manager is retried with capped, jittered
// backoff, forever.
//
// While the agent runs, a Rotator renews the credential before it expires
// (rotation.go): it requests a new token for the agent's own ServiceAccount,
// stores it, and every upstream client built from the Credential sends the
// new token from then on.
//
// When the manager publishes another address for itself (address.go), Follow
// checks that the manager accepts the credential there and stores the
// credential with the new address; the agent then starts its clients again
// from it (agent/move.go), with no new registration.
package registration
