package v1alpha1

// The wire contract between the manager's controllers and the agent: names
// both sides must agree on, kept here so that neither imports the other's
// packages.

import "time"

// Finalizers, one per controller that must clean up before an object goes.
const (
	// ClusterFinalizer makes deleting a Cluster delete its namespace and
	// deployments.
	ClusterFinalizer = "fleet.cattle.io/cluster"
	// BundleFinalizer makes deleting a Bundle delete its BundleDeployments
	// (in other namespaces, where owner references cannot reach).
	BundleFinalizer = "fleet.cattle.io/bundle"
	// GitRepoFinalizer lets the manager delete a GitRepo's Bundles, and its
	// git cache, before the GitRepo goes.
	GitRepoFinalizer = "fleet.cattle.io/gitrepo"
	// HelmOpFinalizer lets the manager delete a HelmOp's Bundle before the
	// HelmOp goes.
	HelmOpFinalizer = "fleet.cattle.io/helmop"
	// RegistrationFinalizer makes deleting a ClusterRegistration revoke its
	// credential. The agent creates registrations with it already set.
	RegistrationFinalizer = "fleet.cattle.io/cluster-registration"
	// RegistrationTokenFinalizer makes deleting a token revoke it: the
	// ServiceAccount behind it and its RBAC.
	RegistrationTokenFinalizer = "fleet.cattle.io/registration-token" //nolint:gosec // G101: a finalizer name, not a credential
	// CAPIEnrollmentFinalizer, on a Cluster API Cluster, makes its deletion
	// delete the fleet Cluster enrolled for it.
	CAPIEnrollmentFinalizer = "fleet.cattle.io/capi-enrollment"
	// AgentRemovalFinalizer, on a Cluster whose agent the manager installed
	// through a kubeconfig, makes its deletion remove that agent downstream
	// before its BundleDeployments go (ClusterFinalizer waits for it), so
	// that the agent is not there to uninstall the releases.
	AgentRemovalFinalizer = "fleet.cattle.io/agent-removal"
)

// KeepResourcesOnUnenrollAnnotation is set on a Cluster (or on the Cluster
// API Cluster it is enrolled for, which passes it on) and says what
// deleting the Cluster does to what its agent deployed: "true", the
// default, removes the agent first and leaves the releases running;
// "false" has the agent uninstall them first (as Fleet's keepResources:
// false would), then removes it.
const KeepResourcesOnUnenrollAnnotation = "fleet.cattle.io/keep-resources-on-unenroll"

// KeepResourcesOnUnenroll tells whether deleting c leaves its releases
// running downstream (see KeepResourcesOnUnenrollAnnotation).
func KeepResourcesOnUnenroll(c *Cluster) bool {
	return c.Annotations[KeepResourcesOnUnenrollAnnotation] != "false"
}

// KeepsDeployments tells whether c, being deleted, still keeps its
// BundleDeployments: its agent is being removed downstream first
// (AgentRemovalFinalizer) and its releases are to stay, so nothing may
// take a deployment away while the agent could still act on it.
//
// A Cluster registered by token (no kubeconfig Secret: the manager cannot
// reach its agent) keeps its deployments until its agents' credentials are
// revoked (AgentsRevokedAnnotation): a revoked agent cannot confirm that a
// deployment is gone, so it uninstalls nothing.
func KeepsDeployments(c *Cluster) bool {
	if c.DeletionTimestamp.IsZero() || !KeepResourcesOnUnenroll(c) {
		return false
	}
	for _, f := range c.Finalizers {
		switch {
		case f == AgentRemovalFinalizer:
			return true
		case f == ClusterFinalizer && c.Spec.KubeConfigSecret == "" && c.Annotations[AgentsRevokedAnnotation] == "":
			return true
		}
	}
	return false
}

// AgentsRevokedAnnotation is set on a Cluster registered by token that is
// being deleted and says (with the time) that its agents' credentials are
// revoked, so its deployments may go without the agent uninstalling the
// releases.
const AgentsRevokedAnnotation = "fleet.cattle.io/agents-revoked"

// UninstallGrace is how long a Cluster registered by token and deleted with
// KeepResourcesOnUnenrollAnnotation "false" keeps its agent's credential
// after its deployments are deleted: the agent uninstalls the releases
// meanwhile (the manager cannot reach it to wait for that).
const UninstallGrace = 30 * time.Second

// CAPIMovedAnnotation is set on a fleet Cluster enrolled for a Cluster API
// Cluster and says (with the time it was seen) that the Cluster API Cluster
// left this management cluster without being deleted: `clusterctl move`
// took it to another one, whose manager enrolls it there. The fleet
// Cluster, its deployments and the releases downstream stay as they are;
// the import stops (the agent now belongs to the other manager). Delete
// the fleet Cluster once the move is done; the agent no longer listens to
// this manager, so that removes nothing downstream.
const CAPIMovedAnnotation = "fleet.cattle.io/capi-moved"

// Keys of a credential Secret (type CredentialSecretType) the manager writes
// for a granted registration, and the agent reads once.
const (
	CredentialTokenKey            = "token"
	CredentialClusterNameKey      = "clusterName"
	CredentialClusterNamespaceKey = "clusterNamespace"
	CredentialNamespaceKey        = "namespace"
)

// Cache index names of the manager.
const (
	// ClientIDIndex indexes Clusters and ClusterRegistrations by
	// spec.clientID.
	ClientIDIndex = "spec.clientID"
	// BundleIndex indexes BundleDeployments by "<namespace>/<name>" of their
	// Bundle.
	BundleIndex = "bundle"
	// RepoIndex indexes BundleDeployments by "<namespace>/<name>" of the
	// GitRepo their Bundle was built from (the Bundle's namespace and its
	// fleet.cattle.io/repo-name label, which BundleDeployments carry).
	RepoIndex = "gitrepo"
	// HelmOpIndex indexes BundleDeployments by "<namespace>/<name>" of the
	// HelmOp their Bundle was made from (the Bundle's namespace and its
	// fleet.cattle.io/fleet-helm-name label, which BundleDeployments carry).
	HelmOpIndex = "helmop"
	// ContentIndex indexes BundleDeployments by the Content they deploy.
	ContentIndex = "content"
	// KubeConfigSecretIndex indexes Clusters by "<namespace>/<name>" of
	// their kubeconfig Secret.
	KubeConfigSecretIndex = "clusterimport.spec.kubeConfigSecret"
)

// The agent's records in its own cluster. Labels and annotations an agent
// reads back after a restart or an upgrade, so that one agent version
// understands what another wrote.
const (
	// ReleaseNameLabel, on every object the agent deploys, is the name of
	// the object's Helm release: the agent watches objects by it.
	ReleaseNameLabel = "fleet.cattle.io/release-name"
	// ReleaseNamespaceLabel, on every object the agent deploys, is the
	// namespace of the object's Helm release.
	ReleaseNamespaceLabel = "fleet.cattle.io/release-namespace"
	// DeploymentIDAnnotation, on a release's chart, is the deploymentID the
	// release deploys.
	DeploymentIDAnnotation = "fleet.cattle.io/deployment-id"
	// BundleDeploymentAnnotation, on a release's chart, names the release's
	// BundleDeployment.
	BundleDeploymentAnnotation = "fleet.cattle.io/bundle-deployment"
	// ClusterNamespaceAnnotation, on a release's chart, is the cluster
	// namespace upstream of the release's BundleDeployment.
	ClusterNamespaceAnnotation = "fleet.cattle.io/cluster-namespace"
	// KeepResourcesAnnotation, "true" on a release's chart, keeps the
	// objects when the BundleDeployment goes.
	KeepResourcesAnnotation = "fleet.cattle.io/keep-resources"
	// DeleteNamespaceAnnotation, "true" on a release's chart, deletes the
	// release namespace when the BundleDeployment goes.
	DeleteNamespaceAnnotation = "fleet.cattle.io/delete-namespace"
	// SyncGenerationAnnotation, on a release's chart, is the
	// forceSyncGeneration the release was deployed for.
	SyncGenerationAnnotation = "fleet.cattle.io/sync-generation"
	// ServiceAccountAnnotation, on a release's chart, is the serviceAccount
	// (in the release namespace) the release was deployed as; it is
	// uninstalled as that account too.
	ServiceAccountAnnotation = "fleet.cattle.io/service-account"
	// ForceNamespaceAnnotation, on a release's chart, is the namespace
	// option the release was deployed with: its hooks obey it on uninstall
	// too.
	ForceNamespaceAnnotation = "fleet.cattle.io/force-namespace"
)

// HelmOps whose chart the agent downloads (Fleet's): the bundle controller
// copies the HelmOp's helmSecretName Secret next to each BundleDeployment of
// the HelmOp's bundle, under the BundleDeployment's name and with this type,
// owned by the BundleDeployment; only the keys the agent uses are copied
// (corev1.BasicAuthUsernameKey, corev1.BasicAuthPasswordKey and
// HelmOpsCACertsKey).
const (
	// HelmOpsAccessSecretType is the type of those copies, Fleet's
	// SecretTypeHelmOpsAccess.
	HelmOpsAccessSecretType = "fleet.cattle.io/bundle-helmops-access/v1alpha1" //nolint:gosec // G101: a Secret type name, not a credential
	// HelmOpsCACertsKey holds PEM CAs to trust for the repository.
	HelmOpsCACertsKey = "cacerts"
)

// OCI storage (Fleet's): a bundle's content pushed to an OCI registry
// instead of a Content. The manager reads the registry Secret in the
// GitRepo's namespace; it writes, next to each BundleDeployment of such a
// bundle, a Secret of the same name holding the agent's (read-only)
// credentials only, which the agent reads in its own namespace.
const (
	// OCIStorageSecretType is the type every OCI storage Secret must have,
	// the registry's and the per-BundleDeployment copies alike.
	OCIStorageSecretType = "fleet.cattle.io/bundle-oci-storage/v1alpha1" //nolint:gosec // G101: a Secret type name, not a credential
	// OCIStorageDefaultSecretName is the namespace-wide registry Secret used
	// by every GitRepo of its namespace that names no ociRegistrySecret.
	OCIStorageDefaultSecretName = "ocistorage"
	// OCIStorageSecretAnnotation, on a Bundle whose spec.contentsId is set,
	// names the registry Secret (in the Bundle's namespace) its content was
	// pushed with, from which its BundleDeployments' Secrets are made.
	OCIStorageSecretAnnotation = "fleet.cattle.io/oci-storage-secret" //nolint:gosec // G101: an annotation name, not a credential

	// OCIStorageReferenceKey is the registry host and repository prefix,
	// without a scheme, e.g. "registry.example.com:5000/fleet/tenant-a".
	OCIStorageReferenceKey = "reference"
	// OCIStorageUsernameKey and OCIStoragePasswordKey: the manager's
	// credentials, which may push; in a BundleDeployment's Secret, the
	// agent's.
	OCIStorageUsernameKey = "username"
	OCIStoragePasswordKey = "password"
	// OCIStorageAgentUsernameKey and OCIStorageAgentPasswordKey: read-only
	// credentials for agents; without them agents get username and password.
	OCIStorageAgentUsernameKey = "agentUsername"
	OCIStorageAgentPasswordKey = "agentPassword"
	// OCIStorageInsecureSkipTLSKey "true" skips TLS verification.
	OCIStorageInsecureSkipTLSKey = "insecureSkipTLS"
	// OCIStorageBasicHTTPKey "true" speaks plain HTTP to the registry.
	OCIStorageBasicHTTPKey = "basicHTTP"
)
