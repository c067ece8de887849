// Package agentinstall installs a fleet agent into a cluster: it applies the
// objects that run it (namespace, ServiceAccount, RBAC, the fleet-agent
// ConfigMap, the fleet-agent-bootstrap Secret holding a registration token,
// and the Deployment) with server-side apply, creates registration tokens,
// and removes an installation.
//
// One renderer serves every way in (internal/agentmanifest, whose names this
// package carries): `fleet install agent-token` and `fleet install
// agent-config` print these objects for a person to apply by hand, the
// manager's import controller applies them through a cluster's kubeconfig,
// and the manager's own install takes the local agent's shape from it. The
// agent reads the same ConfigMap and Secret keys, through ReadBootstrap and
// ReadConfig, so writer and reader cannot drift apart.
package agentinstall
