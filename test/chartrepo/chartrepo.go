// Package chartrepo serves a real Helm chart repository on loopback for
// tests: charts are built and packaged with the Helm SDK, indexed in an
// index.yaml, and served over HTTP or HTTPS with optional basic auth.
package chartrepo

import (
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync"

	"helm.sh/helm/v3/pkg/chart"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/provenance"
	"helm.sh/helm/v3/pkg/repo"
)

// Chart is one chart version to serve.
type Chart struct {
	Name, Version string
	// Values is the chart's values.yaml.
	Values string
	// Templates maps file names below templates/ to their content.
	Templates map[string]string
	// Files are extra files (path: bytes), e.g. binary ones.
	Files map[string][]byte
}

// Options choose how the repository is served.
type Options struct {
	// TLS serves HTTPS with a self-signed certificate (see Repo.CA).
	TLS bool
	// Username and Password, when set, are required as basic auth.
	Username, Password string
}

// Repo is a running chart repository.
type Repo struct {
	*httptest.Server
	// CA is the PEM certificate clients must trust when TLS is on.
	CA []byte

	mu    sync.Mutex
	auths []string
	dir   string
	index *repo.IndexFile
}

// Requests returns how many requests the repository received and the
// Authorization headers among them (empty ones left out).
func (r *Repo) Requests() (int, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	n := 0
	for _, a := range r.auths {
		n++
		if a != "" {
			out = append(out, a)
		}
	}
	return n, out
}

// New packages charts into a temporary directory and serves them.
func New(charts []Chart, o Options) (*Repo, error) {
	dir, err := os.MkdirTemp("", "chartrepo-")
	if err != nil {
		return nil, err
	}
	files := http.FileServer(http.Dir(dir))
	r := &Repo{}
	handler := http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.auths = append(r.auths, req.Header.Get("Authorization"))
		r.mu.Unlock()
		if o.Username != "" {
			if u, p, ok := req.BasicAuth(); !ok || u != o.Username || p != o.Password {
				http.Error(w, "unauthorized", http.StatusUnauthorized)
				return
			}
		}
		files.ServeHTTP(w, req)
	})
	if o.TLS {
		r.Server = httptest.NewTLSServer(handler)
		r.CA = pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: r.Certificate().Raw})
	} else {
		r.Server = httptest.NewServer(handler)
	}
	r.dir, r.index = dir, repo.NewIndexFile()
	if err := r.Add(charts...); err != nil {
		r.Close()
		return nil, err
	}
	return r, nil
}

// Add packages more chart versions and publishes them in index.yaml, as a
// chart repository does when a new version is released.
func (r *Repo) Add(charts ...Chart) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range charts {
		p, err := save(c, r.dir)
		if err != nil {
			return err
		}
		digest, err := provenance.DigestFile(p)
		if err != nil {
			return err
		}
		if err := r.index.MustAdd(c.metadata(), filepath.Base(p), r.URL, digest); err != nil {
			return err
		}
	}
	r.index.SortEntries()
	// Written aside and renamed, so that a client never reads half an index.
	tmp := filepath.Join(r.dir, ".index.yaml.tmp")
	if err := r.index.WriteFile(tmp, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(r.dir, "index.yaml"))
}

func (c Chart) metadata() *chart.Metadata {
	return &chart.Metadata{APIVersion: chart.APIVersionV2, Name: c.Name, Version: c.Version, AppVersion: "1.0"}
}

// save packages c into dir and returns the archive's path.
func save(c Chart, dir string) (string, error) {
	ch := &chart.Chart{
		Metadata: c.metadata(),
		Raw:      []*chart.File{{Name: "values.yaml", Data: []byte(c.Values)}},
	}
	for name, body := range c.Templates {
		ch.Templates = append(ch.Templates, &chart.File{Name: "templates/" + name, Data: []byte(body)})
	}
	for name, body := range c.Files {
		ch.Files = append(ch.Files, &chart.File{Name: name, Data: body})
	}
	return chartutil.Save(ch, dir)
}
