package v1alpha1

// Condition reasons, one wire value per meaning, shared by every kind that
// reports it. Controllers and the agent set them; users, dashboards and
// tests match on them.

// Shared by several kinds.
const (
	// ReasonReady: everything the condition covers is ready.
	ReasonReady = "Ready"
	// ReasonNotReady: something the condition covers is not ready yet; the
	// message says what.
	ReasonNotReady = "NotReady"
	// ReasonError: a failure without a more precise reason.
	ReasonError = "Error"
	// ReasonDeployBinaryMissing: the agent cannot find its deploy binary
	// (fleet-agent-deploy, or what its --deploy-binary flag names).
	ReasonDeployBinaryMissing = "DeployBinaryMissing"
	// ReasonSecretNotFound: a Secret the spec names does not exist.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonInvalidOCIStorage: the OCI storage Secret the object uses
	// (ociRegistrySecret, the namespace's ocistorage Secret, or the one
	// next to a BundleDeployment) has the wrong type or no reference.
	ReasonInvalidOCIStorage = "InvalidOCIStorage"
	// ReasonInvalidSelector: a label selector in the spec does not parse.
	ReasonInvalidSelector = "InvalidSelector"
	// ReasonIdentityConflict: the object would take over another cluster's
	// identity.
	ReasonIdentityConflict = "IdentityConflict"
	// ReasonNotOwned: an object the manager would write under the name it
	// needs exists and was not made by the manager for this object; the
	// manager leaves it alone.
	ReasonNotOwned = "NotOwned"
	// ReasonNamespaceConflict: the namespace a Cluster's deployments would
	// go to exists and is not labelled for that Cluster.
	ReasonNamespaceConflict = "NamespaceConflict"
	// ReasonDestinationRefused: a repository, chart or API URL the object
	// names (or a redirect from it) leads to an address the manager's
	// outbound policy refuses (loopback, link-local, or what the operator
	// denied); nothing was sent there.
	ReasonDestinationRefused = "DestinationRefused"
	// ReasonStateChanged (event): the state a GitRepo, Bundle or Cluster
	// shows (status.display.state) turned into or out of ErrApplied,
	// NotReady, Modified or Offline; the note says from what to what.
	ReasonStateChanged = "StateChanged"
	// ReasonStaleRead: the object, or one the reconcile read, changed
	// since the manager's cache showed it (a status write conflicted, a
	// Cluster was created or claimed meanwhile); the manager looks again
	// shortly, from a fresher cache. It sets no condition.
	ReasonStaleRead = "StaleRead"
)

// GitRepo: Accepted, GitPolling and Ready.
const (
	ReasonPolled        = "Polled"
	ReasonFetchFailed   = "FetchFailed"
	ReasonBundlesRead   = "BundlesRead"
	ReasonInvalidBundle = "InvalidBundle"
	ReasonSyncFailed    = "SyncFailed"
	// ReasonBundleError: a Bundle of the GitRepo is broken itself, e.g. its
	// targets are invalid.
	ReasonBundleError = "BundleError"
	// ReasonRestricted: the GitRepo breaks a GitRepoRestriction of its
	// namespace; it is neither fetched nor deployed.
	ReasonRestricted = "Restricted"
	// ReasonPolicyRefused: the GitRepo, HelmOp or Bundle breaks a rule of
	// the Policies of its namespace (the message names the Policy and the
	// rule), or a Policy of the namespace is broken itself (a pattern that
	// is not a regular expression); nothing new of it is deployed.
	ReasonPolicyRefused = "PolicyRefused"
	// ReasonLocalRepoDisabled: the GitRepo names a local path or file://
	// repository, which the manager does not serve unless started with
	// --allow-local-repos.
	ReasonLocalRepoDisabled = "LocalRepositoryDisabled"
	// ReasonFetchBusy: the namespace already holds its share of the git
	// fetch slots (for a HelmOp, of the chart download slots); the GitRepo
	// or HelmOp is polled when one frees up.
	ReasonFetchBusy = "FetchBusy"
	// ReasonIgnoredFields (Warning): a fleet.yaml holds keys that are
	// ignored, unknown ones or Fleet fields not implemented here.
	ReasonIgnoredFields = "IgnoredFields"
)

// HelmOp: Accepted, Polled and Ready (with the GitRepo reasons Polled,
// FetchFailed, InvalidOptions, Restricted, SecretNotFound, NotOwned,
// BundleError and NotReady).
const (
	// ReasonChartApplied: the chart at the resolved version is in the
	// HelmOp's Bundle.
	ReasonChartApplied = "ChartApplied"
	// ReasonInvalidVersion: helm.version is neither a version nor a semver
	// constraint.
	ReasonInvalidVersion = "InvalidVersion"
	// ReasonVersionNotFound: the repository has no such chart, or no version
	// of it matches helm.version.
	ReasonVersionNotFound = "VersionNotFound"
	// ReasonChartDownloadFailed: the agent could not download the chart of
	// a BundleDeployment with helmChartOptions from its repository (it
	// retries).
	ReasonChartDownloadFailed = "ChartDownloadFailed"
)

// Git errors (GitRepo GitPolling and Accepted): what the remote refused.
const (
	ReasonAuthFailed       = "AuthenticationFailed"
	ReasonHostKey          = "HostKeyVerificationFailed"
	ReasonTLS              = "TLSVerificationFailed"
	ReasonRepoNotFound     = "RepositoryNotFound"
	ReasonBranchNotFound   = "BranchNotFound"
	ReasonRevisionNotFound = "RevisionNotFound"
	ReasonInvalidOptions   = "InvalidOptions"
	// ReasonGitLimitExceeded: a fetch or checkout of the repository went
	// past one of the manager's git limits (pack size, object count, file
	// size, total size, path depth or length); the message names the limit,
	// the file when known, and the manager flag that raises it.
	ReasonGitLimitExceeded = "GitLimitExceeded"
)

// Bundle Ready.
const (
	// ReasonInvalidTargets: the Bundle's targets, targetRestrictions or
	// rolloutStrategy.partitions cannot be compiled.
	ReasonInvalidTargets = "InvalidTargets"
)

// Cluster: Processed and Ready (besides the display states WaitCheckIn and
// Offline, which are Ready reasons too).
const (
	ReasonProcessed = "Processed"
)

// Cluster Imported: the manager-initiated registration.
const (
	ReasonKubeconfigInvalid  = "KubeconfigInvalid"
	ReasonClusterUnreachable = "ClusterUnreachable"
	ReasonAdopting           = "Adopting"
	ReasonWaitingForToken    = "WaitingForToken"
	ReasonInstallFailed      = "InstallFailed"
	ReasonApplied            = "Applied"
	ReasonAgentRegistered    = "AgentRegistered"
	// ReasonSecretNamespaceNotAllowed: spec.kubeConfigSecretNamespace names
	// a namespace other than the Cluster's that the manager does not allow
	// (its --kubeconfig-secret-namespaces flag).
	ReasonSecretNamespaceNotAllowed = "SecretNamespaceNotAllowed"
	// ReasonMovedAway: the Cluster API Cluster the Cluster was enrolled
	// for was moved to another management cluster (CAPIMovedAnnotation);
	// its agent is that manager's now, and this one no longer imports it.
	ReasonMovedAway = "MovedAway"
	// ReasonRemovingAgent: the Cluster is being deleted and the manager
	// removes the agent it installed downstream first (after the
	// deployments, when they are to be uninstalled; see
	// KeepResourcesOnUnenrollAnnotation).
	ReasonRemovingAgent = "RemovingAgent"
	// ReasonAgentRemoved (event): the agent the manager installed was
	// removed from the downstream cluster; ReasonAgentNotRemoved (Warning
	// event): it could not be, the cluster being unreachable or its
	// kubeconfig gone, and the Cluster was let go all the same.
	ReasonAgentRemoved    = "AgentRemoved"
	ReasonAgentNotRemoved = "AgentNotRemoved"
)

// Cluster API Cluster FleetAgentReady.
const (
	ReasonWaitingForControlPlane = "WaitingForControlPlane"
	ReasonInstalling             = "Installing"
	ReasonRegistered             = "Registered"
	ReasonFailed                 = "Failed"
	// ReasonUnenrolled: a person deleted the fleet Cluster of an enrolled
	// Cluster API Cluster; it is not enrolled again until asked.
	ReasonUnenrolled = "Unenrolled"
	// ReasonAgentSilent: the agent checked in once, and not lately.
	ReasonAgentSilent = "AgentSilent"
)

// ClusterRegistration Accepted.
const (
	// ReasonGranted: the credential was written for the agent to fetch.
	ReasonGranted = "Granted"
	// ReasonInvalidRegistration: the agent's request is malformed.
	ReasonInvalidRegistration = "InvalidRegistration"
	// ReasonTokenNotFound: the registration names a token that does not
	// exist (expired or deleted).
	ReasonTokenNotFound = "TokenNotFound"
	// ReasonTokenNotProven: the registration does not prove that its maker
	// holds the token it names, or that token has expired.
	ReasonTokenNotProven = "TokenNotProven"
	// ReasonPendingBound: too many credentials wait for their agents; the
	// registration waits its turn.
	ReasonPendingBound = "PendingBound"
)

// ClusterRegistrationToken Issued.
const (
	// ReasonIssued: the token's values Secret is in place.
	ReasonIssued = "Issued"
	// ReasonReissuing: the token's values Secret was gone; its
	// ServiceAccount is made anew (revoking the values handed out before)
	// and new values are issued. It sets no condition.
	ReasonReissuing = "Reissuing"
)

// BundleDeployment: Installed, Deployed, Monitored and Ready (the agent).
const (
	ReasonDeployed         = "Deployed"
	ReasonDeploying        = "Deploying"
	ReasonPaused           = "Paused"
	ReasonWaitingForDeps   = "WaitingForDependencies"
	ReasonInstalled        = "Installed"
	ReasonNotInstalled     = "NotInstalled"
	ReasonMonitored        = "Monitored"
	ReasonNothingToMonitor = "NothingDeployed"
	ReasonModified         = "Modified"
	ReasonWaitApplied      = "WaitApplied"
	// ReasonInvalidValues: helm.valuesFrom names a ConfigMap or key that is
	// missing downstream, or values that are not YAML.
	ReasonInvalidValues = "InvalidValues"
	// ReasonNamespaceViolation: the bundle forces one namespace (its
	// namespace option), but its chart brings CRDs or a cluster-scoped hook.
	ReasonNamespaceViolation = "NamespaceViolation"
	// ReasonForbidden: the bundle's serviceAccount may not do what the
	// bundle asks downstream (read a valuesFrom source, label its namespace).
	ReasonForbidden = "Forbidden"
	// ReasonNamespaceMissing: the bundle sets createNamespace: false and its
	// release namespace does not exist downstream; someone must create it
	// (or the bundle drop createNamespace: false) before it deploys.
	ReasonNamespaceMissing = "NamespaceMissing"
	// ReasonNamespaceNotAllowed: the bundle's allowedTargetNamespaceSelector
	// (from a GitRepoRestriction) does not select its release namespace
	// downstream, or the namespace does not exist; the message begins with
	// Fleet's text. Labelling (or creating) the namespace lets it deploy.
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"
	// ReasonDeployTimedOut: the deploy ran longer than the agent's bound
	// (--deploy-timeout) and was stopped; it is tried again after a
	// backoff, at once when the bundle changes.
	ReasonDeployTimedOut = "DeployTimedOut"
	// ReasonDeployOutOfMemory: the deploy needed more memory than the
	// agent's bound (--deploy-memory-limit) or its container's limit, and
	// was stopped; retried as after ReasonDeployTimedOut.
	ReasonDeployOutOfMemory = "DeployOutOfMemory"
	// ReasonDownstreamResourceMissing: a Secret or ConfigMap named in
	// downstreamResources does not exist in the bundle's namespace; nothing
	// of the bundle is deployed until it does.
	ReasonDownstreamResourceMissing = "DownstreamResourceMissing"
	// ReasonWaitingForSealing: the downstreamResources are not yet sealed to
	// this agent's current key (the manager has not seen its key yet, or a
	// source changed); it passes by itself.
	ReasonWaitingForSealing = "WaitingForSealing"
	// ReasonSealedResourcesUnreadable: the sealed downstreamResources do not
	// open with this agent's keys or are malformed.
	ReasonSealedResourcesUnreadable = "SealedResourcesUnreadable"
	// ReasonSOPSUnreadable: a SOPS-encrypted file of the bundle does not
	// open with this agent's keys (the cluster is not one of its age
	// recipients), or its MAC does not match; the message names the file
	// and why. Nothing of the bundle is deployed until the file changes.
	ReasonSOPSUnreadable = "SOPSUnreadable"
)

// Schedule Ready: ReasonReady, or False with the field at fault (the message
// names the Schedule and the field).
const (
	// ReasonInvalidSchedule: spec.schedule is not a cron expression.
	ReasonInvalidSchedule = "InvalidSchedule"
	// ReasonInvalidDuration: spec.duration is not positive, or not shorter
	// than the time between two windows.
	ReasonInvalidDuration = "InvalidDuration"
	// ReasonInvalidLocation: spec.location is not a known time zone.
	ReasonInvalidLocation = "InvalidLocation"
)

// BundleDeployment Deployed and Ready (the agent), beside the reasons above.
const (
	// ReasonOffSchedule: the cluster is outside its Schedules' deployment
	// windows; the new deploymentID waits for the next window.
	ReasonOffSchedule = "OffSchedule"
)
