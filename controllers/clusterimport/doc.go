// Package clusterimport is the manager-initiated way in: for a Cluster whose
// spec.kubeConfigSecret names a kubeconfig Secret, it installs the fleet agent
// into that cluster, and from there the agent registers exactly as it would
// with a token.
//
// The Secret is in the Cluster's namespace; spec.kubeConfigSecretNamespace
// may name another only when it is in SecretNamespaces (the manager's
// --kubeconfig-secret-namespaces, default none), else the Cluster stalls with
// SecretNamespaceNotAllowed: the manager reads the Secret with its own
// rights, which must not let a tenant use another tenant's kubeconfig.
// Secrets are watched by their metadata only (internal/secretmeta), and
// each reconcile reads the Secret afresh, uncached (key "value"; optional keys
// "apiServerURL" and "apiServerCA" say how the agent reaches the manager,
// else the Reconciler's APIServerURL/APIServerCA are used), parses it with
// internal/kubeconfig.ToREST (no exec plugins, auth providers or files) and
// builds a throw-away client with a fixed REST mapping (no discovery), whose
// every request is bounded by RemoteTimeout. Then, in order:
//
//  1. Identity: spec.clientID is set to the downstream kube-system UID when
//     empty, so the agent's registration lands on this very Cluster. A
//     Cluster of this namespace with the same identity, registered earlier
//     by token (it has no kubeConfigSecret), is adopted, but only when the
//     downstream kube-system UID read through the kubeconfig is that
//     identity (else IdentityConflict, Stalling: a spec.clientID naming
//     another cluster takes nothing over). Adopting copies its labels that
//     this Cluster lacks, deletes its registrations (revoking their
//     credentials) and deletes it; nothing is installed until it is gone, so that exactly
//     one Cluster holds the identity when the agent registers. Two Clusters
//     importing the same downstream cluster are a conflict: the older wins,
//     the newer reports IdentityConflict.
//  2. One cluster, one Fleet Cluster across namespaces (identity.go): a
//     Cluster of another namespace with the same identity whose agent runs
//     downstream (the agent's credential Secret there, read through the
//     kubeconfig, names it) holds the cluster: nothing is installed and the
//     Cluster reports IdentityConflict naming it, looked at again every
//     CheckInterval, so that deleting that Cluster lets the import go on. A
//     clientID merely copied by a Cluster elsewhere holds nothing.
//  3. The agent Deployment is read downstream. It carries the record of the
//     last install: annotation fleet.cattle.io/agent-settings-hash (a hash
//     of every agent setting: namespace, image, private registry, env,
//     tolerations, affinity, resources, host network, labels, clientID and
//     check-in interval) and, on its pod template,
//     fleet.cattle.io/restarted-at.
//  4. Decide says whether to install: the Deployment is missing;
//     spec.redeployAgentGeneration differs from status.agentDeployedGeneration;
//     the manager's URL or CA changed; an agent runs that this Cluster never
//     installed and that never checked in here (it serves another manager: a
//     Cluster API Cluster moved here by `clusterctl move`); the agent is
//     stale (neither a check-in, status.agent.lastSeen, nor a restart
//     within StaleAfter); or the
//     settings hash differs. All but the last restart the agent: a new
//     restarted-at rolls its pod, and a fresh single-cluster import token
//     (ClusterRegistrationToken import-token-<cluster>, TTL TokenTTL, replaced
//     when less than half of it is left) goes into the fleet-agent-bootstrap
//     Secret so that the agent can register again. A settings change alone
//     re-applies the objects without a token or restart; with AgentBundles
//     (the manager's default) it is left to the Cluster's agent Bundle once
//     the agent has checked in (controllers/agentbundle), and every install
//     uses the image that Bundle has given the cluster so far, so a repair
//     never jumps the rollout's queue. Installs use
//     agentinstall.Apply (server-side apply, field manager
//     fleet-agentinstall) and run at most MaxConcurrentInstalls at a time, so
//     that hundreds of clusters arriving at once queue instead of swamping
//     the manager.
//  5. Once the agent has registered and checks in, the import token is
//     deleted.
//
// Deletion (un-enrolment). Imported Clusters carry the finalizer
// fleet.cattle.io/agent-removal (not the local Cluster), and the cluster
// controller deletes a Cluster's BundleDeployments only once it is gone
// (the bundle controller keeps targeting the Cluster meanwhile,
// fleet.KeepsDeployments). Deleting the Cluster first deletes the agent
// Deployment downstream and waits until no pod of it is left, then removes
// the rest of what was installed (RBAC, ServiceAccount, ConfigMap,
// bootstrap Secret, and the agent namespace when the installer labelled it,
// it is none of Kubernetes' own and it holds no Helm release): no agent is
// left to uninstall the releases when the deployments go, so the workloads
// keep running. With the annotation fleet.cattle.io/keep-resources-on-unenroll:
// "false" on the Cluster the deployments are deleted first and the agent
// is removed once the releases it deployed are gone (it uninstalls them).
// Nothing is removed from a moved-away cluster; a kubeconfig Secret that is
// gone or invalid, refused credentials, or a cluster unreachable for
// RemovalGiveUpAfter (5m) since the deletion let the Cluster go with the
// agent left in place (Warning event AgentNotRemoved); a removal is
// recorded as an event AgentRemoved.
//
// A Cluster annotated fleet.cattle.io/capi-moved (its Cluster API Cluster
// was moved to another management cluster) is no longer imported: Imported
// turns False with MovedAway, and the agent, now the other manager's, is
// never healed from here, which would pull it back.
//
// status.agentDeployedGeneration records the redeployAgentGeneration of the
// last install (the settings hash lives on the Deployment downstream, where
// it describes what is really there); status.apiServerURL and
// status.apiServerCAHash record the manager address handed to the agent.
//
// The Imported condition says where the import stands. Errors go through
// internal/outcome: what only a person can fix stalls the Cluster
// (reconcile.TerminalError; the watches on the Cluster and its kubeconfig
// Secret bring the fix): SecretNotFound, SecretNamespaceNotAllowed,
// IdentityConflict with a token-registered Cluster whose cluster the
// kubeconfig does not reach, KubeconfigInvalid (also a Secret without the
// "value" key, or credentials the cluster rejects) and InstallFailed for
// objects the cluster refuses (Forbidden, Invalid). What fixes itself is
// retried with backoff: ClusterUnreachable, IdentityConflict between two
// imports, Adopting, WaitingForToken, and InstallFailed for other errors.
// Success is Applied (True: objects in place, waiting for the agent)
// and then AgentRegistered (True). A change of the condition is recorded as
// an event on the Cluster. Status is computed once per reconcile and
// written, only when it changed, with server-side apply of only this
// controller's fields (field manager fleet-clusterimport), so the cluster
// controller's conditions stay as they are.
//
// Every imported Cluster is looked at again every CheckInterval (sooner when
// its agent is about to turn stale), which finds a deleted agent
// Deployment; errors are retried with backoff, never on a fixed interval.
// Heartbeats of a registered agent do not trigger reconciles. Defaults:
// StaleAfter 15m; the agent check-in (written into its ConfigMap) and
// CheckInterval 5m, or a third of StaleAfter when that is shorter.
//
// Limits: changing spec.agentNamespace installs the agent in the new
// namespace and leaves the old one in place (its credential is revoked when
// the new agent registers).
package clusterimport
