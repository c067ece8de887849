package v1alpha1

// Bounds of a BundleDeployment's status, which the agent writes and the
// manager caches for every cluster: the CRD schema holds them (the
// +kubebuilder markers on BundleDeploymentStatus say the same numbers, and
// test/api checks the generated CRD against these), so a compromised agent
// cannot make the manager hold more, and the agent cuts what it writes to
// them before writing, or its status write would be refused.
const (
	// MaxStatusConditions bounds status.conditions (the agent writes four).
	MaxStatusConditions = 8
	// MaxStatusMessageLength bounds a condition's message (metav1.Condition's
	// own bound) and the display strings that repeat one.
	MaxStatusMessageLength = 32768
	// MaxStatusEntries bounds status.nonReadyStatus and
	// status.modifiedStatus; status.incompleteState says when more were
	// left out.
	MaxStatusEntries = 10
	// MaxStatusResources bounds status.resources; status.resourceCounts
	// still counts every resource.
	MaxStatusResources = 1000
	// MaxStatusPatchLength bounds the patch of a modifiedStatus entry.
	MaxStatusPatchLength = 4096
	// MaxSummaryMessages and MaxSummaryMessageLength bound the messages of
	// a nonReadyStatus entry's summary.
	MaxSummaryMessages      = 10
	MaxSummaryMessageLength = 1024
	// MaxStatusShortLength bounds the short strings of the status: the
	// release, the applied deploymentID, a state word, a resource's kind
	// and UID.
	MaxStatusShortLength = 256
	// MaxAPIVersionLength bounds a resource's apiVersion (a group of up to
	// 253 characters, "/", a version of up to 63).
	MaxAPIVersionLength = 317
	// MaxNamespaceLength and MaxNameLength bound a resource's namespace (a
	// DNS label) and name (a DNS subdomain).
	MaxNamespaceLength = 63
	MaxNameLength      = 253
)
