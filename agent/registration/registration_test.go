package registration

import (
	"context"
	"errors"
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func TestRequestName(t *testing.T) {
	g := NewWithT(t)
	a := RequestName("6a1f0c2e-uid", "00112233445566778899aabbccddeeff")
	g.Expect(a).To(Equal(RequestName("6a1f0c2e-uid", "00112233445566778899aabbccddeeff")), "a retried create names the same object")
	g.Expect(a).NotTo(Equal(RequestName("6a1f0c2e-uid", "ffeeddccbbaa99887766554433221100")), "a new request is a new object")
	g.Expect(a).To(HavePrefix("request-"))
	g.Expect(validation.IsDNS1123Subdomain(a)).To(BeEmpty())
}

type timeoutErr struct{}

func (timeoutErr) Error() string   { return "i/o timeout" }
func (timeoutErr) Timeout() bool   { return true }
func (timeoutErr) Temporary() bool { return true }

func TestTransient(t *testing.T) {
	g := NewWithT(t)
	gr := schema.GroupResource{Group: "fleet.cattle.io", Resource: "clusterregistrations"}
	g.Expect(transient(apierrors.NewTooManyRequests("busy", 1))).To(BeTrue())
	g.Expect(transient(apierrors.NewServerTimeout(gr, "create", 1))).To(BeTrue())
	g.Expect(transient(fmt.Errorf("post: %w", timeoutErr{}))).To(BeTrue())
	g.Expect(transient(context.DeadlineExceeded)).To(BeTrue())
	g.Expect(transient(apierrors.NewUnauthorized("expired"))).To(BeFalse())
	g.Expect(transient(apierrors.NewForbidden(gr, "x", errors.New("no")))).To(BeFalse())
	g.Expect(transient(errors.New("connection refused"))).To(BeFalse())
}

func TestUpstreamMapper(t *testing.T) {
	m := UpstreamMapper()
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
