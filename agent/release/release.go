package release

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Status is a release revision's status, as Helm writes it.
type Status string

// The statuses Helm v3 gives a release revision.
const (
	StatusUnknown         Status = "unknown"
	StatusDeployed        Status = "deployed"
	StatusUninstalled     Status = "uninstalled"
	StatusSuperseded      Status = "superseded"
	StatusFailed          Status = "failed"
	StatusUninstalling    Status = "uninstalling"
	StatusPendingInstall  Status = "pending-install"
	StatusPendingUpgrade  Status = "pending-upgrade"
	StatusPendingRollback Status = "pending-rollback"
)

// IsPending tells whether an operation on the release was started and has
// not ended (or was interrupted).
func (s Status) IsPending() bool {
	return s == StatusPendingInstall || s == StatusPendingUpgrade || s == StatusPendingRollback
}

// Helm's resource policy: an object annotated ResourcePolicyAnnotation:
// KeepPolicy is neither deleted on uninstall nor when an upgrade drops it.
const (
	ResourcePolicyAnnotation = "helm.sh/resource-policy"
	KeepPolicy               = "keep"
)

// Kept tells whether Helm keeps o by its resource policy: such an object is
// no longer the release's once dropped from it, and nothing of the agent
// deletes it.
func Kept(o *unstructured.Unstructured) bool {
	return o.GetAnnotations()[ResourcePolicyAnnotation] == KeepPolicy
}

// Release is one revision of a Helm release: the fields of Helm's record
// the agent uses, with Helm's JSON names.
type Release struct {
	Name      string `json:"name,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Version   int    `json:"version,omitempty"`
	Info      *Info  `json:"info,omitempty"`
	Chart     *Chart `json:"chart,omitempty"`
	// Manifest is the rendered objects, YAML documents.
	Manifest string `json:"manifest,omitempty"`
}

// Info is a revision's status.
type Info struct {
	Status      Status `json:"status,omitempty"`
	Description string `json:"description,omitempty"`
}

// Chart is the chart a revision deployed; only its metadata.
type Chart struct {
	Metadata *Metadata `json:"metadata,omitempty"`
}

// Metadata is a chart's Chart.yaml, what the agent reads of it.
type Metadata struct {
	Name        string            `json:"name,omitempty"`
	Version     string            `json:"version,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// Key names a release.
type Key struct{ Namespace, Name string }

func (k Key) String() string { return k.Namespace + "/" + k.Name }

// For is the release of a BundleDeployment: helm.releaseName or the
// BundleDeployment's name, in the release namespace.
func For(bdName string, opts fleet.BundleDeploymentOptions) Key {
	name := bdName
	if opts.Helm != nil && opts.Helm.ReleaseName != "" {
		name = opts.Helm.ReleaseName
	}
	return Key{Namespace: Namespace(opts), Name: Name(name)}
}

// Namespace is options.namespace, else defaultNamespace, else "default".
func Namespace(opts fleet.BundleDeploymentOptions) string {
	switch {
	case opts.TargetNamespace != "":
		return opts.TargetNamespace
	case opts.DefaultNamespace != "":
		return opts.DefaultNamespace
	}
	return corev1.NamespaceDefault
}

// Name limits a name to Helm's 53 characters: a longer one keeps its first
// 47 and gets 5 hex digits of its sha256.
func Name(name string) string {
	if len(name) <= 53 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return strings.TrimRight(name[:47], "-.") + "-" + hex.EncodeToString(sum[:])[:5]
}

// Annotations returns what a release records about its BundleDeployment.
func Annotations(r *Release) map[string]string {
	if r == nil || r.Chart == nil || r.Chart.Metadata == nil {
		return nil
	}
	return r.Chart.Metadata.Annotations
}

// Status is the revision's status; StatusUnknown without one.
func (r *Release) Status() Status {
	if r == nil || r.Info == nil || r.Info.Status == "" {
		return StatusUnknown
	}
	return r.Info.Status
}

// Key is the release's name and namespace.
func (r *Release) Key() Key { return Key{Namespace: r.Namespace, Name: r.Name} }

// UpToDate tells whether a release is deployed and deploys deploymentID.
func UpToDate(r *Release, deploymentID string) bool {
	return r != nil && r.Status() == StatusDeployed && Annotations(r)[fleet.DeploymentIDAnnotation] == deploymentID
}

// Display is a release as "namespace/name:version".
func Display(r *Release) string {
	if r == nil {
		return ""
	}
	return fmt.Sprintf("%s/%s:%d", r.Namespace, r.Name, r.Version)
}
