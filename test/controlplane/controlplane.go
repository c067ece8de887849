package controlplane

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/gitfleet/fleet/internal/localcluster"
)

// FailImagePrefix starts the image of a container that the simulated nodes
// cannot run (localcluster.FailImagePrefix).
const FailImagePrefix = localcluster.FailImagePrefix

// Options configure one control plane (localcluster.Options).
type Options = localcluster.Options

// ControlPlane is one running kube-apiserver with its etcd
// (localcluster.ControlPlane).
type ControlPlane = localcluster.ControlPlane

// Workloads configure the processes that let a control plane run workloads
// (localcluster.Workloads).
type Workloads = localcluster.Workloads

// TokenControllers are the controllers of kube-controller-manager that fill
// service-account token Secrets (localcluster.TokenControllers).
var TokenControllers = localcluster.TokenControllers

// Start runs a new control plane and waits until it serves.
func Start(opts Options) (*ControlPlane, error) { return localcluster.Start(opts) }

// StartN starts n control planes at once; names are prefix-0, prefix-1, ...
// On error every control plane already started is stopped.
func StartN(n int, prefix string, opts Options) ([]*ControlPlane, error) {
	return localcluster.StartN(n, prefix, opts)
}

// CAPICRDs returns Cluster API's CRDs that the manager reads.
func CAPICRDs() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return localcluster.CAPICRDs()
}
