// Package agentbundle keeps every registered cluster's agent up to date
// through the agent itself: for each Cluster whose agent has checked in, the
// manager keeps a Bundle fleet-agent-<cluster> in the Cluster's namespace,
// targeted at that cluster only, holding the agent Deployment rendered by
// agentinstall from the Cluster's agent settings (agentEnvVars,
// agentTolerations, agentAffinity, agentResources, privateRepoURL,
// hostNetwork; redeployAgentGeneration as a pod template annotation, which
// restarts the agent) and the agent image the manager offers. The agent
// deploys it like any bundle, with the rights it has downstream, so a
// cluster registered by token gets its settings and new versions without a
// person touching it, as Fleet's agent bundle does.
//
// What the Bundle leaves out: the bootstrap and credential Secrets (a Bundle
// and its Content are read by many; the agent's credential must never be in
// one), the agent ConfigMap (labels and identity matter only at
// registration), and the namespace, ServiceAccount and RBAC the install
// made. It is deployed with keepResources, so deleting it never uninstalls
// the agent, and with takeOwnership, so the release adopts the Deployment
// the install created. The Deployment goes where the agent runs (the
// namespace it reports in status.agent.namespace, else spec.agentNamespace,
// else fleet-system): a Deployment in another namespace would have no
// credential.
//
// A new agent image reaches the clusters of a namespace in batches: a
// cluster moves to it only while fewer than MaxUnavailable of the
// namespace's clusters (a number or a share, default 10%, at least one) have
// an agent Bundle that is not yet deployed and Ready at its current version.
// A cluster counts from the moment its Bundle is written until its agent
// has reported the new Deployment rolled out and available, so an image that
// cannot start keeps its clusters counted and stops the rollout there. A
// cluster already counted moves at no cost (offering a fixed image reaches
// the clusters a broken one stalled on). Creating a cluster's first agent
// Bundle is a move like any other. A change of one Cluster's settings is
// written at once, with the image that cluster has so far.
//
// The agent Deployment rolls with a surge and no unavailability
// (agentinstall): the old agent keeps its leader lease and runs until the
// new pod is ready, then hands over; a new version that cannot start leaves
// the old one running.
//
// A Bundle of an agent Bundle's name that the manager did not make (a
// GitRepo's, say) is left alone, and its cluster is left out of the rollout
// (it would hold a share of the budget it cannot use), with a log line.
//
// The reconcile key is a namespace: one pass plans all of its clusters, so
// the count of clusters in flight is never taken twice at once. What this
// pass wrote and the cache does not show yet is remembered, so a stale cache
// cannot start more clusters than the budget allows.
package agentbundle
