// Package scheme builds the one runtime.Scheme every fleet client starts
// from: Kubernetes' built-in kinds, fleet.cattle.io's and the project's own
// notification.gitfleet.io. The manager adds
// Cluster API's kinds (controllers.Scheme), the agent shares one built once
// (agent/kinds.Scheme), the CLI and the local development environment use it
// as it is. A kind registered that a client never reads costs nothing, so
// there is one constructor rather than one per caller.
package scheme

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	notification "github.com/gitfleet/fleet/api/notification/v1alpha1"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// New returns a new Scheme that knows Kubernetes' built-in kinds,
// fleet.cattle.io's, and those each of add registers. It panics when a
// registration fails, which only a programming error can cause.
func New(add ...func(*runtime.Scheme) error) *runtime.Scheme {
	s := runtime.NewScheme()
	for _, f := range append([]func(*runtime.Scheme) error{clientgoscheme.AddToScheme, fleet.AddToScheme, notification.AddToScheme}, add...) {
		if err := f(s); err != nil {
			panic(err)
		}
	}
	return s
}
