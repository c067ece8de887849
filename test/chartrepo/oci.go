package chartrepo

import (
	"encoding/pem"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"strings"

	"github.com/google/go-containerregistry/pkg/registry"
	helmregistry "helm.sh/helm/v3/pkg/registry"
)

// Registry is an OCI registry served over HTTPS on loopback (an in-memory
// one that stores whatever is pushed), holding charts pushed with Helm's
// registry client, as `helm push` does.
type Registry struct {
	*httptest.Server
	// CA is the PEM certificate clients must trust.
	CA []byte
}

// NewRegistry starts an empty registry.
func NewRegistry() *Registry {
	srv := httptest.NewTLSServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	return &Registry{Server: srv, CA: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})}
}

// Ref is the oci:// reference of a repository path in the registry, e.g.
// Ref("charts/app").
func (r *Registry) Ref(path string) string {
	return "oci://" + strings.TrimPrefix(r.URL, "https://") + "/" + path
}

// Push packages each chart and pushes it to path (a repository of the
// registry) tagged with its version.
func (r *Registry) Push(path string, charts ...Chart) error {
	client, err := helmregistry.NewClient(helmregistry.ClientOptHTTPClient(r.Client()), helmregistry.ClientOptWriter(io.Discard))
	if err != nil {
		return err
	}
	dir, err := os.MkdirTemp("", "chartrepo-oci-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	for _, c := range charts {
		p, err := save(c, dir)
		if err != nil {
			return err
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		ref := strings.TrimPrefix(r.Ref(path), "oci://") + ":" + c.Version
		if _, err := client.Push(data, ref); err != nil {
			return err
		}
	}
	return nil
}
