package dashboard

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	ctrl "sigs.k8s.io/controller-runtime"
)

// cookieName holds the token the login page was given.
const cookieName = "fleet-dashboard-token"

type ctxKey struct{}

func userFrom(ctx context.Context) *User {
	u, _ := ctx.Value(ctxKey{}).(*User)
	return u
}

// Handler is the dashboard's HTTP handler.
func (s *Server) Handler() http.Handler { return s.mux }

func (s *Server) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(staticFS, "static")
	m.Handle("GET /static/", s.guard(http.StripPrefix("/static/", http.FileServerFS(static))))
	m.HandleFunc("GET /login", s.login)
	m.HandleFunc("POST /login", s.login)
	m.HandleFunc("POST /logout", s.logout)
	m.Handle("GET /events", s.authed(s.events))
	m.Handle("GET /{$}", s.authed(s.overview))
	m.Handle("GET /gitrepos", s.authed(s.gitrepos))
	m.Handle("GET /matrix", s.authed(s.matrix))
	m.Handle("GET /bundles/{ns}/{name}", s.authed(s.bundle))
	m.Handle("GET /clusters", s.authed(s.clusters))
	m.Handle("GET /clusters/{ns}/{name}", s.authed(s.cluster))
	m.Handle("GET /tokens", s.authed(s.tokens))
	m.Handle("GET /capi", s.authed(s.capiView))
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			s.fail(w, r, http.StatusMethodNotAllowed, "The dashboard is read-only: "+r.Method+" is not served")
			return
		}
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("There is no page %s", r.URL.Path))
	})
	s.mux = m
}

// ServeHTTP checks the Host header and sets the security headers on every
// response.
func (s *Server) guard(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		if len(s.o.Hosts) > 0 && !slices.Contains(s.o.Hosts, r.Host) {
			http.Error(w, "Unknown host "+r.Host+": open the address the dashboard printed", http.StatusMisdirectedRequest)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func tokenOf(r *http.Request) string {
	if a := r.Header.Get("Authorization"); a != "" {
		if t, ok := strings.CutPrefix(a, "Bearer "); ok {
			return strings.TrimSpace(t)
		}
		return ""
	}
	if c, err := r.Cookie(cookieName); err == nil {
		return c.Value
	}
	return ""
}

// authed runs h for an authenticated user; others get 401 and the login
// page.
func (s *Server) authed(h http.HandlerFunc) http.Handler {
	return s.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok := tokenOf(r)
		if tok == "" {
			s.loginPage(w, r, http.StatusUnauthorized, "")
			return
		}
		u, err := s.o.Authenticator.Authenticate(r.Context(), tok)
		if errors.Is(err, ErrUnauthenticated) {
			s.loginPage(w, r, http.StatusUnauthorized, "The token was not accepted (unknown or expired): give a valid one")
			return
		}
		if err != nil {
			ctrl.LoggerFrom(r.Context()).Error(err, "Dashboard authentication failed")
			s.fail(w, r, http.StatusServiceUnavailable, "The token could not be checked now; try again")
			return
		}
		h(w, r.WithContext(context.WithValue(r.Context(), ctxKey{}, u)))
	}))
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request, status int, msg string) {
	w.Header().Set("WWW-Authenticate", `Bearer realm="fleet dashboard"`)
	s.render(w, r, status, "login", page{Title: "Log in", Data: msg})
}

// login takes a token from the form (or, with TokenInURL, the query), checks
// it and keeps it in an HTTP-only cookie.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	s.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var tok string
		switch {
		case r.Method == http.MethodPost:
			if o := r.Header.Get("Origin"); o != "" && o != "null" {
				if u, err := url.Parse(o); err != nil || u.Host != r.Host {
					s.fail(w, r, http.StatusForbidden, "A login from another site is refused")
					return
				}
			}
			tok = strings.TrimSpace(r.PostFormValue("token"))
		case s.o.TokenInURL:
			tok = r.URL.Query().Get("token")
		}
		if tok == "" {
			s.loginPage(w, r, http.StatusOK, "")
			return
		}
		if _, err := s.o.Authenticator.Authenticate(r.Context(), tok); err != nil {
			s.loginPage(w, r, http.StatusUnauthorized, "The token was not accepted (unknown or expired): give a valid one")
			return
		}
		// Secure only under TLS: the local dashboard serves plain HTTP on loopback.
		http.SetCookie(w, &http.Cookie{Name: cookieName, Value: tok, Path: "/", HttpOnly: true, Secure: r.TLS != nil, //nolint:gosec // G124: Secure is set whenever served over TLS; plain HTTP (loopback) would drop a Secure cookie
			SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, "/", http.StatusSeeOther)
	})).ServeHTTP(w, r)
}

func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	s.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true, //nolint:gosec // G124: not a session: an empty, expired cookie that only clears it
			SameSite: http.SameSiteStrictMode})
		http.Redirect(w, r, "/login", http.StatusSeeOther)
	})).ServeHTTP(w, r)
}

// events streams a "change" event whenever something changed; the page then
// fetches itself again. Nothing about the objects is sent.
func (s *Server) events(w http.ResponseWriter, r *http.Request) {
	fl, ok := w.(http.Flusher)
	if !ok {
		http.Error(w, "streaming is not supported", http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusOK)
	v, wake := s.hub.current()
	fmt.Fprintf(w, "retry: 2000\nevent: hello\ndata: %d\n\n", v)
	fl.Flush()
	// A token may expire or be revoked: streams end after a while and the
	// browser reconnects, through authentication again.
	end := time.After(5 * time.Minute)
	tick := time.NewTicker(20 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-r.Context().Done():
			return
		case <-end:
			return
		case <-tick.C:
			fmt.Fprint(w, ": keep-alive\n\n")
		case <-wake:
			v, wake = s.hub.current()
			fmt.Fprintf(w, "event: change\ndata: %d\n\n", v)
		}
		fl.Flush()
	}
}

// page is what every template gets.
type page struct {
	Title   string
	Section string
	User    string
	Query   url.Values
	Path    string
	Hidden  []string
	Data    any
	// Live is true on pages that follow changes.
	Live bool
}

// render writes a page, or only its content when the page script asks
// (header X-Fleet-Partial).
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	t := s.pages[name]
	p.Path = r.URL.Path
	p.Query = r.URL.Query()
	if u := userFrom(r.Context()); u != nil {
		p.User = u.Name
	}
	tmpl := "layout"
	if r.Header.Get("X-Fleet-Partial") != "" {
		tmpl = "content"
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, tmpl, p); err != nil {
		ctrl.LoggerFrom(r.Context()).Error(err, "Rendering a dashboard page", "page", name)
		http.Error(w, "The page could not be rendered", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(buf.Bytes())
}

// fail renders an error page with a status and a message for a person.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	s.guard(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.render(w, r, status, "error", page{Title: http.StatusText(status), Data: errorData{Status: status, Message: msg}})
	})).ServeHTTP(w, r)
}

type errorData struct {
	Status  int
	Message string
}

// read takes the user's snapshot, or writes an error page and returns nil.
func (s *Server) read(w http.ResponseWriter, r *http.Request) *Snapshot {
	snap, err := s.snapshot(r.Context(), userFrom(r.Context()))
	if err != nil {
		ctrl.LoggerFrom(r.Context()).Error(err, "Reading the dashboard's objects")
		s.fail(w, r, http.StatusServiceUnavailable, "The fleet's objects could not be read now; try again")
		return nil
	}
	return snap
}
