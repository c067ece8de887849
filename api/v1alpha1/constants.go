package v1alpha1

import "time"

// Namespaces. The system namespace is configurable everywhere (Rancher uses
// cattle-fleet-system); these are the defaults.
const (
	// DefaultSystemNamespace runs the manager upstream and the agent downstream.
	DefaultSystemNamespace = "fleet-system"
	// DefaultSystemRegistrationNamespace holds agent credential secrets: the
	// system namespace with its "-system" suffix turned into "-clusters-system".
	DefaultSystemRegistrationNamespace = "fleet-clusters-system"
	// DefaultWorkspace is where Clusters, GitRepos and Bundles live by default.
	DefaultWorkspace = "fleet-default"
	// LocalWorkspace holds the Cluster for the manager's own cluster.
	LocalWorkspace = "fleet-local"
)

// The manager's own cluster, kept in LocalWorkspace under the names Fleet
// gives it, so that a GitRepo there without targets lands on it.
const (
	// LocalClusterName names the Cluster of the manager's own cluster.
	LocalClusterName = "local"
	// LocalClusterSecretName names that Cluster's spec.kubeConfigSecret. It
	// holds no credential here: the manager installs the local agent with
	// its own connection, and the Secret only tells the agent how to reach
	// the manager (KubeConfigSecretAPIServerURLKey and ...CAKey).
	LocalClusterSecretName = "local-cluster"
	// LocalClusterLabel, with the value LocalClusterName, is the label of
	// the local Cluster that the default ClusterGroup of LocalWorkspace
	// selects ("name: local", as in Fleet).
	LocalClusterLabel = "name"
)

// Labels set by fleet on the objects it generates.
const (
	// ManagedLabel, set to "true", marks objects fleet generated and may delete.
	ManagedLabel = "fleet.cattle.io/managed"
	// BundleNameLabel names the Bundle a BundleDeployment was made from.
	BundleNameLabel = "fleet.cattle.io/bundle-name"
	// BundleNamespaceLabel is the namespace of the Bundle a BundleDeployment was
	// made from; the BundleDeployment itself lives in the cluster namespace.
	BundleNamespaceLabel = "fleet.cattle.io/bundle-namespace"
	// ClusterLabel names the Cluster a BundleDeployment targets.
	ClusterLabel = "fleet.cattle.io/cluster"
	// ClusterNamespaceLabel is the namespace of the Cluster a BundleDeployment
	// targets.
	ClusterNamespaceLabel = "fleet.cattle.io/cluster-namespace"
	// ContentNameLabel names the Content a BundleDeployment deploys, so
	// unreferenced Contents can be found.
	ContentNameLabel = "fleet.cattle.io/content-name"
	// RepoLabel names the GitRepo a Bundle was built from.
	RepoLabel = "fleet.cattle.io/repo-name"
	// HelmOpLabel names the HelmOp a Bundle was made from (Fleet's label).
	HelmOpLabel = "fleet.cattle.io/fleet-helm-name"
	// CommitLabel is the git commit a Bundle was built from, when known.
	CommitLabel = "fleet.cattle.io/commit"
	// RegistrationTokenLabel names the ClusterRegistrationToken an agent used to
	// create a ClusterRegistration.
	RegistrationTokenLabel = "fleet.cattle.io/registration-token" //nolint:gosec // G101: a label key naming a token object, not a credential
	// RegistrationProofAnnotation, on a ClusterRegistration, proves that its
	// maker holds the token RegistrationTokenLabel names: anyone holding a
	// token may create registrations, and set that label to any token's
	// name. It is a keyed hash of the request made with the token's value,
	// which the manager checks (internal/registration.TokenProof).
	RegistrationProofAnnotation = "fleet.cattle.io/registration-proof"
	// RegistrationTokenClusterLabel, on a ClusterRegistrationToken, binds
	// the token to one Cluster of its namespace (`fleet install agent-token
	// --cluster NAME`): only such a token may register again onto a Cluster
	// whose agent has already checked in.
	RegistrationTokenClusterLabel = "fleet.cattle.io/cluster-name" //nolint:gosec // G101: a label key, not a credential
)

// Secrets and their keys.
const (
	// CredentialSecretType is the type of the secrets that hand a registered
	// agent its upstream credentials.
	CredentialSecretType = "fleet.cattle.io/agent-credential" //nolint:gosec // G101: a Secret type name, not a credential
	// RenewedCredentialSecretName names the Secret in an agent's cluster
	// namespace where the manager puts the agent's next token, under
	// CredentialTokenKey, before the current one runs out: the agent reads
	// it by name and switches to it (credential rotation).
	RenewedCredentialSecretName = "fleet-agent-credential" //nolint:gosec // G101: a Secret name, not a credential
	// CredentialIssuedAtAnnotation (RFC 3339) and
	// CredentialServiceAccountAnnotation (namespace/name), on the
	// RenewedCredentialSecretName Secret, say when the token in it was
	// issued and for which ServiceAccount: the manager learns when the next
	// one is due from the Secret's metadata, without reading the token.
	CredentialIssuedAtAnnotation       = "fleet.cattle.io/credential-issued-at"       //nolint:gosec // G101: an annotation key, not a credential
	CredentialServiceAccountAnnotation = "fleet.cattle.io/credential-service-account" //nolint:gosec // G101: an annotation key, not a credential
	// KubeConfigSecretValueKey holds the kubeconfig in a Cluster's
	// spec.kubeConfigSecret (the same key as Cluster API's <cluster>-kubeconfig).
	KubeConfigSecretValueKey = "value"
	// KubeConfigSecretAPIServerURLKey optionally tells the agent the manager's
	// API server URL.
	KubeConfigSecretAPIServerURLKey = "apiServerURL"
	// KubeConfigSecretAPIServerCAKey optionally tells the agent the CA of the
	// manager's API server.
	KubeConfigSecretAPIServerCAKey = "apiServerCA"
	// RegistrationTokenSecretValuesKey holds, in a ClusterRegistrationToken's
	// secret, the YAML values an agent needs to register.
	RegistrationTokenSecretValuesKey = "values"
)

// Agent objects in the downstream system namespace.
const (
	// AgentName names the agent's Deployment, ServiceAccount, credential Secret
	// and ConfigMap.
	AgentName = "fleet-agent"
	// AgentBootstrapSecretName names the Secret holding the registration token.
	AgentBootstrapSecretName = "fleet-agent-bootstrap"
)

// The agent's check-in upstream: a coordination.k8s.io Lease of this name in
// its cluster namespace, renewed by the agent (spec.renewTime), which the
// manager folds into its Cluster's status.agent.
const (
	// AgentLeaseName names the agent's check-in Lease in its cluster
	// namespace.
	AgentLeaseName = "fleet-agent-checkin"
	// AgentNamespaceAnnotation on the check-in Lease is the agent's
	// downstream namespace (folded into status.agent.namespace).
	AgentNamespaceAnnotation = "fleet.cattle.io/agent-namespace"
	// RenewalHashAnnotation on the check-in Lease is the agent's proof that
	// it registers again (see ClusterAgentStatus.RenewalHash).
	RenewalHashAnnotation = "fleet.cattle.io/renewal-hash"
	// SealingKeyAnnotation on the check-in Lease is the agent's sealing
	// public key (internal/sealing): the manager seals the
	// downstreamResources of the cluster's BundleDeployments to it. Only the
	// agent (and the manager) may write its Lease.
	SealingKeyAnnotation = "fleet.cattle.io/sealing-key"
	// DownstreamResourceOwnerLabel, on a Secret or ConfigMap the agent
	// created from downstreamResources, names the BundleDeployment it came
	// from; DownstreamResourceNamespaceLabel its cluster namespace.
	DownstreamResourceOwnerLabel     = "fleet.cattle.io/downstream-resource-of"
	DownstreamResourceNamespaceLabel = "fleet.cattle.io/downstream-resource-namespace"
	// BundleDeploymentOwnershipLabel is Fleet's label naming the
	// BundleDeployment a copy of a downstream resource was made for; the
	// agent sets it too, for tools written against Fleet.
	BundleDeploymentOwnershipLabel = "fleet.cattle.io/bundledeployment"
)

// Defaults applied by the controllers rather than by the CRDs.
const (
	// DefaultTargetName and DefaultClusterGroup make up the target used when
	// neither fleet.yaml nor the GitRepo gives one:
	// {name: default, clusterGroup: default}.
	DefaultTargetName = "default"
	// DefaultClusterGroup is the cluster group of the default target.
	DefaultClusterGroup = "default"
	// DefaultPollingInterval is how often a GitRepo is polled when
	// spec.pollingInterval is unset.
	DefaultPollingInterval = 15 * time.Second
	// ImportTokenPrefix prefixes the name of the ClusterRegistrationToken the
	// manager creates to import a cluster: import-token-<cluster>.
	ImportTokenPrefix = "import-token-"
	// DefaultImportTokenTTL is the lifetime of an import token.
	DefaultImportTokenTTL = 12 * time.Hour
	// ClusterStateWaitCheckIn is a Cluster's display state before its agent
	// first checks in.
	ClusterStateWaitCheckIn = "WaitCheckIn"
	// ClusterStateOffline is a Cluster's display state when its agent has
	// not checked in for a while.
	ClusterStateOffline = "Offline"
)

// Condition types.
const (
	// ConditionReady is set on every kind that has conditions.
	ConditionReady = "Ready"
	// ConditionAccepted tells whether a GitRepo's spec could be acted on.
	ConditionAccepted = "Accepted"
	// ConditionGitPolling tells whether the last poll of a GitRepo's remote
	// succeeded.
	ConditionGitPolling = "GitPolling"
	// ConditionWarning is True on a GitRepo while the fleet.yaml files of its
	// last read commit hold something that is ignored rather than refused
	// (an unknown key, a Fleet field not implemented here); its message lists
	// them. It is absent otherwise, and never makes the GitRepo not Ready:
	// Fleet ignores such keys silently, so repositories written for Fleet
	// must keep deploying.
	ConditionWarning = "Warning"
	// ConditionPolled tells whether the last check of a polling HelmOp's
	// repository for a new version succeeded.
	ConditionPolled = "Polled"
	// ConditionInstalled tells whether a BundleDeployment's release is installed.
	ConditionInstalled = "Installed"
	// ConditionDeployed tells whether a BundleDeployment's last apply succeeded.
	ConditionDeployed = "Deployed"
	// ConditionMonitored tells whether the agent could read the state of a
	// BundleDeployment's resources.
	ConditionMonitored = "Monitored"
	// ConditionProcessed tells whether the manager could act on a Cluster.
	ConditionProcessed = "Processed"
	// ConditionImported tells whether a manager-initiated registration deployed
	// the agent to a Cluster.
	ConditionImported = "Imported"
	// ConditionIssued tells whether the manager could issue a
	// ClusterRegistrationToken's values.
	ConditionIssued = "Issued"
)
