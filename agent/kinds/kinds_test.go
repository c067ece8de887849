package kinds

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/test/controlplane"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Scope answers from cached discovery, reads discovery again once when a
// kind is missing (finding a CRD installed after the cache was filled), and
// answers unknown for a kind the cluster does not serve.
func TestScope(t *testing.T) {
	cp, err := controlplane.Start(controlplane.Options{Name: "agent-kinds", NoCRDs: true})
	if err != nil {
		t.Fatalf("starting a control plane: %v", err)
	}
	t.Cleanup(func() { _ = cp.Stop() })
	ctx := t.Context()

	// refreshes counts the reads of the discovery of API groups: one per
	// filling of the cache.
	var refreshes atomic.Int32
	cfg := rest.CopyConfig(cp.Config)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet && r.URL.Path == "/apis" {
				refreshes.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m := NewMapper(memory.NewMemCacheClient(dc))

	scope := func(gvk schema.GroupVersionKind, wantNamespaced, wantKnown bool, wantRefreshes int32) {
		t.Helper()
		before := refreshes.Load()
		namespaced, known := m.Scope(gvk)
		if namespaced != wantNamespaced || known != wantKnown {
			t.Errorf("Scope(%s) = namespaced %v, known %v; want %v, %v", gvk, namespaced, known, wantNamespaced, wantKnown)
		}
		if got := refreshes.Load() - before; got != wantRefreshes {
			t.Errorf("Scope(%s) read discovery %d times, want %d", gvk, got, wantRefreshes)
		}
	}
	widget := schema.GroupVersionKind{Group: "kinds.example.com", Version: "v1", Kind: "Widget"}

	scope(schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, true, true, 1) // fills the cache
	scope(schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}, false, true, 0)
	scope(schema.GroupVersionKind{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"}, false, true, 0)
	// Unknown: one refresh per question, never more.
	scope(widget, false, false, 1)
	scope(widget, false, false, 1)
	scope(schema.GroupVersionKind{Group: "apps", Version: "v9", Kind: "Deployment"}, false, false, 1)

	installWidget(ctx, t, cp.Config)
	// The cache was filled before the CRD existed: one refresh finds it.
	scope(widget, true, true, 1)
	scope(widget, true, true, 0)
}

// installWidget installs the namespaced kind Widget and waits until
// discovery serves it.
func installWidget(ctx context.Context, t *testing.T, cfg *rest.Config) {
	t.Helper()
	s := runtime.NewScheme()
	_ = apiextensionsv1.AddToScheme(s)
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets.kinds.example.com"},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: "kinds.example.com",
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: "widgets", Singular: "widget", Kind: "Widget", ListKind: "WidgetList"},
			Scope: apiextensionsv1.NamespaceScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: &apiextensionsv1.JSONSchemaProps{Type: "object"}}}},
		},
	}
	if err := c.Create(ctx, crd); err != nil {
		t.Fatalf("creating the Widget CRD: %v", err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		res, err := dc.ServerResourcesForGroupVersion("kinds.example.com/v1")
		if err != nil {
			return false, nil //nolint:nilerr // the group is not served yet: poll again
		}
		for _, r := range res.APIResources {
			if r.Kind == "Widget" {
				return true, nil
			}
		}
		return false, nil
	})
	if err != nil {
		t.Fatalf("waiting for discovery to serve kinds.example.com/v1 Widget: %v", err)
	}
}
