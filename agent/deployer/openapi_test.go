package deployer

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/kinds"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// Helm's validation reads the OpenAPI documents of what it deploys (1.6 MB for
// core/v1); after the deploy the Deployer's shared discovery must hold none of
// them: asked for the OpenAPI paths, it has to read them from the API server.
func TestOpenAPIDocumentsLiveForOneDeploy(t *testing.T) {
	cfg := rest.CopyConfig(controlPlane(t).Config)
	var docs, index atomic.Int32
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripFunc(func(r *http.Request) (*http.Response, error) {
			switch {
			case r.URL.Path == "/openapi/v3":
				index.Add(1)
			case strings.HasPrefix(r.URL.Path, "/openapi/v3/api/v1"):
				docs.Add(1)
			}
			return rt.RoundTrip(r)
		})
	})
	c, err := client.New(cfg, client.Options{Scheme: kinds.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	d, err := New(cfg, c, "cluster-ns")
	if err != nil {
		t.Fatal(err)
	}
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: openapi-probe}\ndata: {key: a}\n"
	in := Input{Name: "openapi", DeploymentID: "1", Files: Files{"cm.yaml": []byte(cm)},
		Options: fleet.BundleDeploymentOptions{DefaultNamespace: "default"}}
	if _, err := d.Deploy(t.Context(), in); err != nil {
		t.Fatalf("deploy: %v", err)
	}
	if docs.Load() == 0 {
		t.Fatalf("the deploy read no OpenAPI document of core/v1: Helm validated nothing, the test proves nothing")
	}
	before := index.Load()
	if _, err := d.discovery.OpenAPIV3().Paths(); err != nil {
		t.Fatalf("reading the OpenAPI paths: %v", err)
	}
	if index.Load() == before {
		t.Fatalf("the shared discovery answered the OpenAPI paths from a cache the deploy filled: it keeps the deploy's documents")
	}
}
