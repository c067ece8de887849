// Package kinds holds the kinds the agent knows: the Scheme every client of
// the agent and of fleet-agent-deploy is built with, and a Mapper of the
// agent's own cluster's kinds to their resources and scopes, over cached
// discovery. Both the resident agent (drift correction, monitoring) and
// fleet-agent-deploy (forcing namespaces) ask it whether a kind is
// namespaced; it links nothing of Helm.
package kinds

import (
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/restmapper"
)

// Mapper is a REST mapper over cached discovery that reads discovery again
// when asked about a kind it does not know.
type Mapper struct {
	*restmapper.DeferredDiscoveryRESTMapper
}

// NewMapper returns a Mapper over disc.
func NewMapper(disc discovery.CachedDiscoveryInterface) *Mapper {
	return &Mapper{DeferredDiscoveryRESTMapper: restmapper.NewDeferredDiscoveryRESTMapper(disc)}
}

// Scope tells whether a kind is namespaced. A kind missing from the cached
// discovery makes it read discovery again, once per call (a CRD may just
// have been installed); known is false when the kind is still missing, or
// when discovery cannot be read.
func (m *Mapper) Scope(gvk schema.GroupVersionKind) (namespaced, known bool) {
	mapping, err := m.RESTMapping(gvk.GroupKind(), gvk.Version)
	if meta.IsNoMatchError(err) {
		m.Reset()
		mapping, err = m.RESTMapping(gvk.GroupKind(), gvk.Version)
	}
	if err != nil {
		return false, false
	}
	return mapping.Scope.Name() == meta.RESTScopeNameNamespace, true
}
