package dashboard

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	"github.com/gitfleet/fleet/internal/scheme"
)

// newTestServer serves a dashboard whose cache is never started: these
// checks are refused or answered before anything is read.
func newTestServer(t *testing.T) *httptest.Server {
	t.Helper()
	c, err := cache.New(&rest.Config{Host: "https://127.0.0.1:1"}, cache.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(Options{Cache: c, Authenticator: Secret("s3cret"), Authorizer: AllowAll{}, TokenInURL: true})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	return srv
}

func get(t *testing.T, u string, header map[string]string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		if k == "Host" {
			req.Host = v // the client sends req.Host, not the header
			continue
		}
		req.Header.Set(k, v)
	}
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestRefusals(t *testing.T) {
	g := NewWithT(t)
	srv := newTestServer(t)
	for _, path := range []string{"/", "/matrix", "/events", "/bundles/ws/b", "/clusters", "/tokens"} {
		resp, body := get(t, srv.URL+path, nil)
		g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), "anonymous %s", path)
		g.Expect(body).To(ContainSubstring(`id="token"`), "the login page")
		resp, body = get(t, srv.URL+path, map[string]string{"Authorization": "Bearer wrong"})
		g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), "a wrong token on %s", path)
		g.Expect(body).To(ContainSubstring("not accepted"))
	}
	resp, _ := get(t, srv.URL+"/", map[string]string{"Cookie": cookieName + "=wrong"})
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), "a wrong cookie")

	resp, body := get(t, srv.URL+"/no/such/page", nil)
	g.Expect(resp.StatusCode).To(Equal(http.StatusNotFound))
	g.Expect(body).To(ContainSubstring("There is no page /no/such/page"))
	g.Expect(resp.Header.Get("Content-Security-Policy")).To(ContainSubstring("default-src 'none'"))

	post, err := http.Post(srv.URL+"/matrix", "text/plain", strings.NewReader("x"))
	g.Expect(err).NotTo(HaveOccurred())
	_ = post.Body.Close()
	g.Expect(post.StatusCode).To(Equal(http.StatusMethodNotAllowed), "read-only")

	resp, _ = get(t, srv.URL+"/login?token=wrong", nil)
	g.Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized))
	resp, _ = get(t, srv.URL+"/login?token=s3cret", nil)
	g.Expect(resp.StatusCode).To(Equal(http.StatusSeeOther))
	g.Expect(resp.Cookies()).To(ContainElement(And(HaveField("Name", cookieName), HaveField("Value", "s3cret"),
		HaveField("HttpOnly", true), HaveField("SameSite", http.SameSiteStrictMode))))

	// A login form posted from another site is refused.
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/login", strings.NewReader(url.Values{"token": {"s3cret"}}.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", "https://evil.example")
	post, err = http.DefaultClient.Do(req)
	g.Expect(err).NotTo(HaveOccurred())
	_ = post.Body.Close()
	g.Expect(post.StatusCode).To(Equal(http.StatusForbidden))
}

func TestHostGuard(t *testing.T) {
	g := NewWithT(t)
	c, err := cache.New(&rest.Config{Host: "https://127.0.0.1:1"}, cache.Options{Scheme: scheme.New()})
	g.Expect(err).NotTo(HaveOccurred())
	s, err := New(Options{Cache: c, Authenticator: Secret("s3cret"), Authorizer: AllowAll{}, TokenInURL: true,
		Hosts: []string{"127.0.0.1:1234"}})
	g.Expect(err).NotTo(HaveOccurred())
	srv := httptest.NewServer(s.Handler())
	defer srv.Close()
	// A page of another site that resolves its name to 127.0.0.1 (DNS
	// rebinding) sends its own Host: refused, even with the secret.
	resp, _ := get(t, srv.URL+"/login?token=s3cret", nil)
	g.Expect(resp.StatusCode).To(Equal(http.StatusMisdirectedRequest))
	resp, _ = get(t, srv.URL+"/static/app.js", nil)
	g.Expect(resp.StatusCode).To(Equal(http.StatusMisdirectedRequest), "static files too")
	// Served under the Host it was started for.
	resp, body := get(t, srv.URL+"/static/app.js", map[string]string{"Host": "127.0.0.1:1234"})
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK), body)
	g.Expect(resp.Header.Get("X-Content-Type-Options")).To(Equal("nosniff"))
}
