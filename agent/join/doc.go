// Package join is the agent's side of joining a fleet: registration. From
// the fleet-agent-bootstrap Secret (a registration token) and the
// fleet-agent ConfigMap (labels, optional identity) in its own cluster, it
// creates a ClusterRegistration upstream, waits for the manager to grant
// it, stores the credential it receives in the fleet-agent Secret
// (upstream.Store) and deletes the bootstrap Secret, so the cluster keeps
// no token.
//
// On every start a stored credential that still works is reused; one the
// manager rejects is replaced by registering again, as soon as a bootstrap
// Secret is present. An unreachable manager is retried with capped,
// jittered backoff (agent/backoff), forever. Once joined, the credential is
// kept working by agent/upstream (rotation, following the manager's
// address); the rules the manager checks a registration by are shared in
// internal/registration.
package join
