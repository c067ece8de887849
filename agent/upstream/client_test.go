package upstream

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func TestMapper(t *testing.T) {
	m := Mapper()
	for _, c := range []struct {
		gvk        schema.GroupVersionKind
		resource   string
		namespaced bool
	}{
		{fleet.GroupVersion.WithKind("BundleDeployment"), "bundledeployments", true},
		{fleet.GroupVersion.WithKind("BundleDeploymentList"), "bundledeployments", true},
		{fleet.GroupVersion.WithKind("ClusterRegistration"), "clusterregistrations", true},
		{fleet.GroupVersion.WithKind("Cluster"), "clusters", true},
		{fleet.GroupVersion.WithKind("Content"), "contents", false},
		{fleet.GroupVersion.WithKind("ContentList"), "contents", false},
		{corev1.SchemeGroupVersion.WithKind("Secret"), "secrets", true},
		{corev1.SchemeGroupVersion.WithKind("ConfigMapList"), "configmaps", true},
	} {
		mapping, err := m.RESTMapping(c.gvk.GroupKind(), c.gvk.Version)
		if err != nil {
			t.Errorf("%s: %v", c.gvk, err)
			continue
		}
		if mapping.Resource.Resource != c.resource || (mapping.Scope.Name() == meta.RESTScopeNameNamespace) != c.namespaced {
			t.Errorf("%s: got %s (scope %s), want %s (namespaced %v)", c.gvk, mapping.Resource.Resource, mapping.Scope.Name(), c.resource, c.namespaced)
		}
	}
	if _, err := m.RESTMapping(fleet.GroupVersion.WithKind("Bundle").GroupKind()); err == nil {
		t.Error("Bundle: an agent never uses Bundles, so the mapper must not know them")
	}
}
