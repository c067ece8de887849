// Package agentmanifest renders the objects that run a fleet agent in a
// cluster (namespace, ServiceAccount, RBAC, the fleet-agent ConfigMap, the
// fleet-agent-bootstrap Secret holding a registration token, and the
// Deployment) and reads that ConfigMap and Secret back as the agent sees
// them, so writer and reader cannot drift apart.
//
// It is the renderer agentinstall applies to clusters, and the one the
// manager's own install (internal/install) takes the local agent's shape
// from: both import it, so internal/install does not reach up to
// agentinstall.
package agentmanifest
