package v1alpha1

// The agent Bundle: the manager keeps one per registered Cluster, in the
// Cluster's namespace (named by names.AgentBundle), holding that cluster's agent Deployment, and the agent
// deploys it like any bundle (see controllers/agentbundle).
const (
	// AgentBundleLabel, "true", marks an agent Bundle (and, copied, its
	// BundleDeployment).
	AgentBundleLabel = "fleet.cattle.io/agent-bundle"
	// AgentBundleHashLabel is a hash of the agent Bundle's resources. It is
	// copied onto the BundleDeployment in the same write as its
	// deploymentID, so a BundleDeployment carrying the Bundle's hash is one
	// the manager has moved to that version.
	AgentBundleHashLabel = "fleet.cattle.io/agent-hash"
	// AgentImageAnnotation on an agent Bundle is the agent image it
	// deploys, before a Cluster's privateRepoURL: the image the rollout has
	// given that cluster so far.
	AgentImageAnnotation = "fleet.cattle.io/agent-image"
)
