// Package agentinstall renders the objects that run a fleet agent in a cluster
// (namespace, ServiceAccount, RBAC, the fleet-agent ConfigMap, the
// fleet-agent-bootstrap Secret holding a registration token, and the
// Deployment) and applies them with server-side apply.
//
// One renderer serves every way in: `fleet install agent-token` and
// `fleet install agent-config` print these objects for a person to apply by hand,
// and the manager's import controller applies them through a cluster's
// kubeconfig. The agent reads the same ConfigMap and Secret keys, through
// ReadBootstrap and ReadConfig, so writer and reader cannot drift apart.
package agentinstall
