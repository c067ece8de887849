package chartrepo

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"

	"github.com/google/go-containerregistry/pkg/registry"
)

// Access is what one user of an AuthRegistry may do: read the repositories
// under each of Prefixes, and write them too when Push is set.
type Access struct {
	Password string
	Push     bool
	Prefixes []string
}

// AuthRegistry is an in-memory OCI registry on loopback, over plain HTTP,
// that authenticates every request with HTTP basic auth and scopes each
// user to repository prefixes, as registries with per-repository
// permissions (Harbor projects, distribution's token auth) do. It counts
// the requests it gets, the blobs and blob bytes it serves, and the
// requests it refused. As distribution
// does, a blob is served only from the repositories it was pushed (or
// mounted) to: knowing a digest does not open it through another
// repository.
type AuthRegistry struct {
	*httptest.Server
	users map[string]Access

	mu        sync.Mutex
	served    int64
	pulls     int64
	requests  int64
	refusedBy map[string]int
	links     map[string]bool // "<repository>@<digest>"
}

// NewAuthRegistry starts an empty registry for users (name to Access).
func NewAuthRegistry(users map[string]Access) *AuthRegistry {
	r := &AuthRegistry{users: users, refusedBy: map[string]int{}, links: map[string]bool{}}
	inner := registry.New(registry.Logger(log.New(io.Discard, "", 0)))
	r.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		r.mu.Lock()
		r.requests++
		r.mu.Unlock()
		if !r.allowed(w, req) || !r.linked(w, req) {
			return
		}
		cw := &countingWriter{ResponseWriter: w}
		inner.ServeHTTP(cw, req)
		r.link(req, cw.status)
		if req.Method == http.MethodGet && strings.Contains(req.URL.Path, "/blobs/") {
			r.mu.Lock()
			r.served += cw.n
			if cw.status == 0 || cw.status == http.StatusOK {
				r.pulls++
			}
			r.mu.Unlock()
		}
	}))
	return r
}

// Host is the registry's host:port, the start of a reference.
func (r *AuthRegistry) Host() string { return strings.TrimPrefix(r.URL, "http://") }

// BlobBytesServed is the number of blob bytes read from the registry.
func (r *AuthRegistry) BlobBytesServed() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.served
}

// BlobPulls is the number of blobs served whole (GETs answered 200).
func (r *AuthRegistry) BlobPulls() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pulls
}

// Requests is the number of requests the registry got, the 401
// challenges every client starts with included.
func (r *AuthRegistry) Requests() int64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.requests
}

// Refused is the number of requests refused to user (401s not counted:
// those are the challenges every client starts with).
func (r *AuthRegistry) Refused(user string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.refusedBy[user]
}

// allowed authenticates and authorizes req, answering it when not.
func (r *AuthRegistry) allowed(w http.ResponseWriter, req *http.Request) bool {
	user, pass, ok := req.BasicAuth()
	a, known := r.users[user]
	if !ok || !known || a.Password != pass {
		w.Header().Set("WWW-Authenticate", `Basic realm="registry"`)
		ociError(w, http.StatusUnauthorized, "UNAUTHORIZED", "authentication required")
		return false
	}
	repo, ok := repository(req.URL.Path)
	if !ok {
		return true // /v2/ and the catalog: nothing stored
	}
	write := req.Method != http.MethodGet && req.Method != http.MethodHead
	for _, p := range a.Prefixes {
		if (repo == p || strings.HasPrefix(repo, p+"/")) && (!write || a.Push) {
			return true
		}
	}
	r.mu.Lock()
	r.refusedBy[user]++
	r.mu.Unlock()
	ociError(w, http.StatusForbidden, "DENIED", "requested access to the resource is denied")
	return false
}

// repository is the repository a /v2/<name>/(blobs|manifests|tags)/...
// path names.
func repository(path string) (string, bool) {
	rest, ok := strings.CutPrefix(path, "/v2/")
	if !ok {
		return "", false
	}
	for _, kind := range []string{"/blobs/", "/manifests/", "/tags/"} {
		if i := strings.LastIndex(rest, kind); i > 0 {
			return rest[:i], true
		}
	}
	return "", false
}

func ociError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = io.WriteString(w, `{"errors":[{"code":"`+code+`","message":"`+msg+`"}]}`)
}

type countingWriter struct {
	http.ResponseWriter
	n      int64
	status int
}

func (c *countingWriter) WriteHeader(status int) {
	c.status = status
	c.ResponseWriter.WriteHeader(status)
}

// linked answers a blob read of a repository the blob was not pushed to
// with BLOB_UNKNOWN, and refuses a mount from a repository the user may
// not read.
func (r *AuthRegistry) linked(w http.ResponseWriter, req *http.Request) bool {
	repo, _ := repository(req.URL.Path)
	if from := req.URL.Query().Get("from"); from != "" && req.URL.Query().Get("mount") != "" {
		user, _, _ := req.BasicAuth()
		if !r.readable(user, from) || !r.isLinked(from, req.URL.Query().Get("mount")) {
			ociError(w, http.StatusNotFound, "BLOB_UNKNOWN", "blob unknown to registry")
			return false
		}
		return true
	}
	_, dgst, isBlob := strings.Cut(req.URL.Path, "/blobs/")
	if !isBlob || strings.HasPrefix(dgst, "uploads") || (req.Method != http.MethodGet && req.Method != http.MethodHead) {
		return true
	}
	if !r.isLinked(repo, dgst) {
		ociError(w, http.StatusNotFound, "BLOB_UNKNOWN", "blob unknown to registry")
		return false
	}
	return true
}

func (r *AuthRegistry) isLinked(repo, dgst string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.links[repo+"@"+dgst]
}

// link records the blob a successful upload or mount put in a repository,
// and the config and layers of a manifest (pushed before it).
func (r *AuthRegistry) link(req *http.Request, status int) {
	if status != http.StatusCreated {
		return
	}
	repo, _ := repository(req.URL.Path)
	q := req.URL.Query()
	d := q.Get("digest")
	if d == "" {
		d = q.Get("mount")
	}
	if d == "" {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.links[repo+"@"+d] = true
}

func (r *AuthRegistry) readable(user, repo string) bool {
	for _, p := range r.users[user].Prefixes {
		if repo == p || strings.HasPrefix(repo, p+"/") {
			return true
		}
	}
	return false
}

func (c *countingWriter) Write(b []byte) (int, error) {
	n, err := c.ResponseWriter.Write(b)
	c.n += int64(n)
	return n, err
}
