package upstream

import (
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/kinds"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Mapper maps the kinds an agent uses on the manager's API server to their
// resources without asking it: discovery would be two more requests per
// agent, and thousands of agents start at once after an outage or an
// install.
func Mapper() meta.RESTMapper {
	m := meta.NewDefaultRESTMapper(nil)
	add := func(gv schema.GroupVersion, kind string, scope meta.RESTScope) {
		plural, singular := meta.UnsafeGuessKindToResource(gv.WithKind(kind))
		m.AddSpecific(gv.WithKind(kind), plural, singular, scope)
		// Caches ask about lists by their own kind.
		m.AddSpecific(gv.WithKind(kind+"List"), plural, singular, scope)
	}
	for _, kind := range []string{"ClusterRegistration", "Cluster", "BundleDeployment"} {
		add(fleet.GroupVersion, kind, meta.RESTScopeNamespace)
	}
	add(fleet.GroupVersion, "Content", meta.RESTScopeRoot)
	for _, kind := range []string{"Secret", "ConfigMap", "ServiceAccount"} {
		add(corev1.SchemeGroupVersion, kind, meta.RESTScopeNamespace)
	}
	add(coordinationv1.SchemeGroupVersion, "Lease", meta.RESTScopeNamespace)
	return m
}

// NewClient is a client of the manager's API server.
func NewClient(cfg *rest.Config) (client.WithWatch, error) {
	return client.NewWithWatch(cfg, client.Options{Scheme: kinds.Scheme(), Mapper: Mapper()})
}
