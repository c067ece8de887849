package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func init() {
	register(&Policy{}, &PolicyList{})
}

// +kubebuilder:object:root=true
// +kubebuilder:resource:categories=fleet
// +kubebuilder:printcolumn:name="Require-ServiceAccount",type=boolean,JSONPath=`.requireServiceAccount`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`

// Policy restricts what the GitRepos, HelmOps and Bundles of its namespace
// may do, as Fleet's Policy does. The GitRepo and HelmOp controllers fill in
// its defaults and check them; the Bundle controller only checks (a Bundle
// written directly gets no defaults). Several Policies of one namespace are
// combined as Fleet combines them: booleans OR-ed, allowed lists joined,
// the first default set (by Policy name) used. A GitRepo or HelmOp must
// also satisfy every GitRepoRestriction of its namespace.
type Policy struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// RequireServiceAccount refuses a GitRepo, HelmOp or Bundle whose
	// serviceAccount is empty once the defaults are filled in. It also turns
	// namespace creation off for their deployments unless
	// AllowNamespaceCreation is set.
	// +optional
	RequireServiceAccount bool `json:"requireServiceAccount,omitempty"`
	// AllowedServiceAccounts, when not empty, are the serviceAccounts that
	// may be set.
	// +optional
	// +nullable
	AllowedServiceAccounts []string `json:"allowedServiceAccounts,omitempty"`
	// AllowNamespaceCreation lets the agent create a missing release
	// namespace although RequireServiceAccount is set (a tenant's account
	// then does not need the cluster-wide right to create namespaces).
	// +optional
	AllowNamespaceCreation bool `json:"allowNamespaceCreation,omitempty"`
	// GitRepo holds what only GitRepos get: defaults and allowed sources.
	// +optional
	GitRepo *GitRepoPolicySpec `json:"gitRepo,omitempty"`
	// HelmOp holds what only HelmOps get: defaults and allowed charts.
	// +optional
	HelmOp *HelmOpPolicySpec `json:"helmOp,omitempty"`
}

// GitRepoPolicySpec holds a Policy's defaults and restrictions for GitRepos.
type GitRepoPolicySpec struct {
	// DefaultServiceAccount is set on GitRepos that set none, before
	// requireServiceAccount is checked.
	// +optional
	DefaultServiceAccount string `json:"defaultServiceAccount,omitempty"`
	// DefaultClientSecretName is set on GitRepos that set none.
	// +optional
	DefaultClientSecretName string `json:"defaultClientSecretName,omitempty"`
	// AllowedClientSecretNames, when not empty, are the clientSecretNames
	// GitRepos may set.
	// +optional
	// +nullable
	AllowedClientSecretNames []string `json:"allowedClientSecretNames,omitempty"`
	// AllowedRepoPatterns, when not empty, are regular expressions one of
	// which must match a GitRepo's repo as a whole.
	// +optional
	// +nullable
	AllowedRepoPatterns []string `json:"allowedRepoPatterns,omitempty"`
}

// HelmOpPolicySpec holds a Policy's defaults and restrictions for HelmOps.
type HelmOpPolicySpec struct {
	// DefaultServiceAccount is set on HelmOps that set none, before
	// requireServiceAccount is checked.
	// +optional
	DefaultServiceAccount string `json:"defaultServiceAccount,omitempty"`
	// DefaultHelmSecretName is set on HelmOps that set none.
	// +optional
	DefaultHelmSecretName string `json:"defaultHelmSecretName,omitempty"`
	// AllowedHelmSecretNames, when not empty, are the helmSecretNames
	// HelmOps may set.
	// +optional
	// +nullable
	AllowedHelmSecretNames []string `json:"allowedHelmSecretNames,omitempty"`
	// AllowedHelmRepoPatterns, when not empty, are regular expressions one
	// of which must match a HelmOp's helm.repo as a whole.
	// +optional
	// +nullable
	AllowedHelmRepoPatterns []string `json:"allowedHelmRepoPatterns,omitempty"`
	// AllowedChartPatterns, when not empty, are regular expressions one of
	// which must match a HelmOp's helm.chart as a whole.
	// +optional
	// +nullable
	AllowedChartPatterns []string `json:"allowedChartPatterns,omitempty"`
}

// +kubebuilder:object:root=true

// PolicyList is a list of Policies.
type PolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`

	// Items are the Policies.
	Items []Policy `json:"items"`
}
