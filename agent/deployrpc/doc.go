// Package deployrpc is how the resident agent asks fleet-agent-deploy to
// install, upgrade or uninstall one release.
//
// The agent is split in two binaries so that the one that runs all the time
// does not link Helm's SDK: the initialization of the packages Helm links
// (its actions, Kubernetes client, template engine, storage drivers,
// Kustomize, kubectl) touches most pages of a binary, and text/template keeps
// every exported method reachable, so linking them costs the resident agent
// tens of megabytes for as long as it runs. fleet-agent-deploy links them and
// performs one operation per process run: the agent writes a Request as JSON
// on its standard input, the child logs on its standard error (forwarded
// into the agent's log) and writes a Response as JSON on its standard output,
// then exits.
//
// The Request carries how to reach the agent's cluster (Connection, the
// agent's own REST config) so that the child acts exactly as the agent
// would, impersonating a bundle's serviceAccount as the agent does. A child
// killed mid-operation leaves the release pending, as a crashed agent
// would; the next deploy recovers it.
package deployrpc
