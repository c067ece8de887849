// Package gittest makes real git repositories for tests: a repository on disk
// to commit to with go-git, a smart-HTTP git server on loopback that serves
// such repositories with go-git's server (fetch only), optionally behind
// basic auth, and an SSH server on loopback (SSHServer) that serves them
// with git's own git-upload-pack. Only SSHServer needs the git binary.
package gittest

import (
	"bytes"
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-git/go-billy/v5/osfs"
	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing"
	"github.com/go-git/go-git/v5/plumbing/cache"
	"github.com/go-git/go-git/v5/plumbing/format/pktline"
	"github.com/go-git/go-git/v5/plumbing/object"
	"github.com/go-git/go-git/v5/plumbing/protocol/packp"
	"github.com/go-git/go-git/v5/plumbing/storer"
	"github.com/go-git/go-git/v5/plumbing/transport"
	"github.com/go-git/go-git/v5/plumbing/transport/server"
	"github.com/go-git/go-git/v5/storage/filesystem"
)

// Repo is a repository with a worktree on disk.
type Repo struct {
	// Dir is the worktree; its path is also a URL fetchers accept.
	Dir  string
	repo *git.Repository
}

// NewRepo creates an empty repository in dir whose HEAD is the branch.
func NewRepo(dir, branch string) (*Repo, error) {
	r, err := git.PlainInitWithOptions(dir, &git.PlainInitOptions{
		InitOptions: git.InitOptions{DefaultBranch: plumbing.NewBranchReferenceName(branch)},
	})
	if err != nil {
		return nil, err
	}
	return &Repo{Dir: dir, repo: r}, nil
}

// Commit writes files (path relative to the worktree: content), removes the
// paths in remove (files or whole directories) and commits everything on
// the current branch. It returns the commit sha.
func (r *Repo) Commit(msg string, files map[string]string, remove ...string) (string, error) {
	for name, content := range files {
		p := filepath.Join(r.Dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			return "", err
		}
	}
	for _, name := range remove {
		if err := os.RemoveAll(filepath.Join(r.Dir, filepath.FromSlash(name))); err != nil {
			return "", err
		}
	}
	wt, err := r.repo.Worktree()
	if err != nil {
		return "", err
	}
	if err := wt.AddWithOptions(&git.AddOptions{All: true}); err != nil {
		return "", err
	}
	h, err := wt.Commit(msg, &git.CommitOptions{
		AllowEmptyCommits: true,
		Author:            &object.Signature{Name: "test", Email: "test@example.com", When: time.Now()},
	})
	if err != nil {
		return "", err
	}
	return h.String(), nil
}

// Branch creates (or moves) a branch to point at HEAD and checks it out.
func (r *Repo) Branch(name string) error {
	wt, err := r.repo.Worktree()
	if err != nil {
		return err
	}
	head, err := r.repo.Head()
	if err != nil {
		return err
	}
	ref := plumbing.NewBranchReferenceName(name)
	if err := r.repo.Storer.SetReference(plumbing.NewHashReference(ref, head.Hash())); err != nil {
		return err
	}
	return wt.Checkout(&git.CheckoutOptions{Branch: ref})
}

// Tag creates a tag at HEAD, annotated when message is not empty.
func (r *Repo) Tag(name, message string) error {
	head, err := r.repo.Head()
	if err != nil {
		return err
	}
	var opts *git.CreateTagOptions
	if message != "" {
		opts = &git.CreateTagOptions{Message: message, Tagger: &object.Signature{Name: "test", Email: "test@example.com", When: time.Now()}}
	}
	_, err = r.repo.CreateTag(name, head.Hash(), opts)
	return err
}

// Server serves the repositories below a directory over git's smart HTTP
// protocol: http://HOST/NAME (or NAME.git) is the repository in ROOT/NAME.
type Server struct {
	*httptest.Server

	mu                 sync.Mutex
	username, password string
	anyUser            bool
	users              map[string]string
	counts             map[string]*Counts
	uploads            atomic.Int64
	loader             loader
	srv                transport.Transport
}

// NewServer starts a server for the repositories below root.
func NewServer(root string) *Server {
	l := loader{root: root}
	s := &Server{loader: l, srv: server.NewServer(l)}
	s.Server = httptest.NewServer(s)
	return s
}

// loader opens ROOT/NAME, bare or with a worktree.
type loader struct{ root string }

func (l loader) Load(ep *transport.Endpoint) (storer.Storer, error) {
	name := strings.Trim(ep.Path, "/")
	if !filepath.IsLocal(name) {
		return nil, transport.ErrRepositoryNotFound
	}
	st, err := OpenStorage(filepath.Join(l.root, name))
	if err != nil && strings.HasSuffix(name, ".git") {
		// As git hosts do, serve NAME as NAME.git too.
		st, err = OpenStorage(filepath.Join(l.root, strings.TrimSuffix(name, ".git")))
	}
	if err != nil {
		return nil, transport.ErrRepositoryNotFound
	}
	return st, nil
}

// OpenStorage opens the object store of the repository in dir (bare, or
// the .git of a worktree) so that objects larger than 1 MiB are read as they
// are sent, never whole: serving a large file takes no more memory than a
// small one.
func OpenStorage(dir string) (storer.Storer, error) {
	if fi, err := os.Stat(filepath.Join(dir, git.GitDirName)); err == nil && fi.IsDir() {
		dir = filepath.Join(dir, git.GitDirName)
	}
	st := filesystem.NewStorageWithOptions(osfs.New(dir), cache.NewObjectLRUDefault(), filesystem.Options{LargeObjectThreshold: 1 << 20})
	if _, err := git.Open(st, nil); err != nil {
		return nil, err
	}
	return st, nil
}

// SetBasicAuth makes the server require these credentials; an empty
// password turns authentication off.
func (s *Server) SetBasicAuth(username, password string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.username, s.password, s.anyUser = username, password, false
}

// SetToken makes the server require this token as the basic auth
// password, whatever the user name, as GitHub and GitLab take personal access
// tokens; an empty token turns authentication off.
func (s *Server) SetToken(token string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.username, s.password, s.anyUser = "", token, true
}

// AddUser makes the server accept these credentials too, beside those of
// SetBasicAuth or SetToken (which it then requires of everyone else): one
// server, one user per tenant. Each user's requests are counted apart
// (CountsOf).
func (s *Server) AddUser(username, password string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.users == nil {
		s.users = map[string]string{}
	}
	s.users[username] = password
}

// Counts are the requests a server answered: Lists are ls-remotes (info/refs
// GETs), Fetches upload-pack POSTs, Bytes what their answers held; Refused
// are the requests turned away for their credentials.
type Counts struct {
	Lists, Fetches, Bytes, Refused int64
}

// CountsOf is what the server answered the user: AddUser's name, or "" for
// requests without AddUser's credentials.
func (s *Server) CountsOf(username string) Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.counts[username]; ok {
		return *c
	}
	return Counts{}
}

// Total is what the server answered everyone.
func (s *Server) Total() Counts {
	s.mu.Lock()
	defer s.mu.Unlock()
	var t Counts
	for _, c := range s.counts {
		t.Lists += c.Lists
		t.Fetches += c.Fetches
		t.Bytes += c.Bytes
		t.Refused += c.Refused
	}
	return t
}

// count adds to the counts of user under the lock.
func (s *Server) count(user string, add func(*Counts)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.counts == nil {
		s.counts = map[string]*Counts{}
	}
	c, ok := s.counts[user]
	if !ok {
		c = &Counts{}
		s.counts[user] = c
	}
	add(c)
}

// countingWriter counts the bytes of an answer.
type countingWriter struct {
	http.ResponseWriter
	n int64
}

func (w *countingWriter) Write(b []byte) (int, error) {
	n, err := w.ResponseWriter.Write(b)
	w.n += int64(n)
	return n, err
}

// authorize says whose credentials req carries: a user of AddUser, or ""
// for SetBasicAuth's, SetToken's or (when no password is set) none.
func (s *Server) authorize(req *http.Request) (string, bool) {
	s.mu.Lock()
	username, password, anyUser, users := s.username, s.password, s.anyUser, s.users
	s.mu.Unlock()
	u, p, ok := req.BasicAuth()
	if ok {
		if want, known := users[u]; known && subtle.ConstantTimeCompare([]byte(p), []byte(want)) == 1 {
			return u, true
		}
	}
	if password == "" && len(users) == 0 {
		return "", true
	}
	if password == "" {
		return u, false
	}
	userOK := anyUser || subtle.ConstantTimeCompare([]byte(u), []byte(username)) == 1
	if !ok || !userOK || subtle.ConstantTimeCompare([]byte(p), []byte(password)) != 1 {
		if _, known := users[u]; known {
			return u, false
		}
		return "", false
	}
	return "", true
}

// RepoURL is the URL of the repository ROOT/name.
func (s *Server) RepoURL(name string) string {
	return s.URL + "/" + name
}

// Fetches counts the upload-pack (fetch) requests served.
func (s *Server) Fetches() int64 {
	return s.uploads.Load()
}

// ServeHTTP implements the two requests of a smart-HTTP fetch.
func (s *Server) ServeHTTP(rw http.ResponseWriter, req *http.Request) {
	user, ok := s.authorize(req)
	if !ok {
		s.count(user, func(c *Counts) { c.Refused++ })
		rw.Header().Set("WWW-Authenticate", `Basic realm="git"`)
		http.Error(rw, "authentication required", http.StatusUnauthorized)
		return
	}
	w := &countingWriter{ResponseWriter: rw}
	switch {
	case req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/info/refs"):
		if req.URL.Query().Get("service") != transport.UploadPackServiceName {
			http.Error(w, "only git-upload-pack is served", http.StatusForbidden)
			return
		}
		s.advertise(w, req, strings.TrimSuffix(req.URL.Path, "/info/refs"))
		s.count(user, func(c *Counts) { c.Lists++; c.Bytes += w.n })
	case req.Method == http.MethodPost && strings.HasSuffix(req.URL.Path, "/"+transport.UploadPackServiceName):
		s.uploads.Add(1)
		s.uploadPack(w, req, strings.TrimSuffix(req.URL.Path, "/"+transport.UploadPackServiceName))
		s.count(user, func(c *Counts) { c.Fetches++; c.Bytes += w.n })
	default:
		http.NotFound(w, req)
	}
}

func (s *Server) session(w http.ResponseWriter, path string) (transport.UploadPackSession, bool) {
	ep, err := transport.NewEndpoint(path)
	if err == nil {
		var sess transport.UploadPackSession
		sess, err = s.srv.NewUploadPackSession(ep, nil)
		if err == nil {
			return sess, true
		}
	}
	if errors.Is(err, transport.ErrRepositoryNotFound) {
		http.Error(w, "repository not found", http.StatusNotFound)
	} else {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
	return nil, false
}

func (s *Server) advertise(w http.ResponseWriter, req *http.Request, path string) {
	sess, ok := s.session(w, path)
	if !ok {
		return
	}
	defer sess.Close()
	ar, err := sess.AdvertisedReferencesContext(req.Context())
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	s.peel(path, ar)
	ar.Prefix = [][]byte{[]byte("# service=" + transport.UploadPackServiceName), pktline.Flush}
	var buf bytes.Buffer
	if err := ar.Encode(&buf); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/x-git-upload-pack-advertisement")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(buf.Bytes())
}

// peel adds the commits of annotated tags, as git does; go-git's server
// leaves them out.
func (s *Server) peel(path string, ar *packp.AdvRefs) {
	st, err := s.loader.Load(&transport.Endpoint{Path: path})
	if err != nil {
		return
	}
	for name, h := range ar.References {
		if tag, err := object.GetTag(st, h); err == nil {
			if c, err := tag.Commit(); err == nil {
				ar.Peeled[name] = c.Hash
			}
		}
	}
}

func (s *Server) uploadPack(w http.ResponseWriter, req *http.Request, path string) {
	sess, ok := s.session(w, path)
	if !ok {
		return
	}
	defer sess.Close()
	upr := packp.NewUploadPackRequest()
	if err := upr.Decode(req.Body); err != nil {
		http.Error(w, fmt.Sprintf("decoding the upload request: %v", err), http.StatusBadRequest)
		return
	}
	sc := pktline.NewScanner(req.Body)
	for sc.Scan() {
		line := bytes.TrimSpace(sc.Bytes())
		if bytes.Equal(line, []byte("done")) {
			break
		}
		if h, ok := bytes.CutPrefix(line, []byte("have ")); ok {
			upr.Haves = append(upr.Haves, plumbing.NewHash(string(h)))
		}
	}
	resp, err := sess.UploadPack(req.Context(), upr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/x-git-upload-pack-result")
	_ = resp.Encode(w)
}
