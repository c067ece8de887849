package egress

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	"golang.org/x/net/proxy"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// counter is a TCP listener that counts the connections it accepts.
type counter struct {
	net.Listener
	n atomic.Int64
}

func listen(t *testing.T, addr string) *counter {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	c := &counter{Listener: l}
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			c.n.Add(1)
			_ = conn.Close()
		}
	}()
	return c
}

// server is an HTTP server on addr that counts its requests.
func server(t *testing.T, addr string, h http.HandlerFunc) (*httptest.Server, *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("listening on %s: %v", addr, err)
	}
	var n atomic.Int64
	s := &httptest.Server{Listener: l, Config: &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		h(w, r)
	})}}
	s.Start()
	t.Cleanup(s.Close)
	return s, &n
}

func expectRefused(g *WithT, err error) {
	g.Expect(err).To(HaveOccurred())
	g.Expect(errors.Is(err, ErrRefused)).To(BeTrue(), "%v", err)
	g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonDestinationRefused))
}

func TestDialerRefusesBeforeConnecting(t *testing.T) {
	g := NewWithT(t)
	l := listen(t, "127.0.0.1:0")
	_, port, _ := net.SplitHostPort(l.Addr().String())
	ctx := context.Background()

	for _, addr := range []string{l.Addr().String(), net.JoinHostPort("localhost", port)} {
		_, err := NewDialer(Policy{}).DialContext(ctx, "tcp", addr)
		expectRefused(g, err)
	}
	_, err := NewDialer(Policy{Allow: prefixes("127.0.0.0/8"), Deny: prefixes("127.0.0.1/32")}).DialContext(ctx, "tcp", l.Addr().String())
	expectRefused(g, err)
	g.Expect(l.n.Load()).To(BeZero())

	conn, err := NewDialer(AllowLoopback()).DialContext(ctx, "tcp", l.Addr().String())
	g.Expect(err).NotTo(HaveOccurred())
	_ = conn.Close()
	g.Eventually(l.n.Load).Should(BeEquivalentTo(1))

	var none *Dialer
	conn, err = none.DialContext(ctx, "tcp", l.Addr().String())
	g.Expect(err).NotTo(HaveOccurred())
	_ = conn.Close()
}

func TestTransportChecksRedirects(t *testing.T) {
	g := NewWithT(t)
	denied, hits := server(t, "127.0.0.1:0", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "secret") })
	allowed, _ := server(t, "127.0.0.2:0", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, denied.URL+"/latest/meta-data", http.StatusFound)
	})
	d := NewDialer(Policy{Allow: prefixes("127.0.0.0/8"), Deny: prefixes("127.0.0.1/32")})

	_, err := (&http.Client{Transport: d.Transport()}).Get(allowed.URL)
	expectRefused(g, err)
	_, err = (&http.Client{Transport: d.Transport()}).Get(denied.URL)
	expectRefused(g, err)
	g.Expect(hits.Load()).To(BeZero())
}

func TestContextTransport(t *testing.T) {
	g := NewWithT(t)
	s, hits := server(t, "127.0.0.1:0", func(w http.ResponseWriter, _ *http.Request) {})
	client := &http.Client{Transport: ContextTransport()}
	get := func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s.URL, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	expectRefused(g, get(WithDialer(context.Background(), NewDialer(Policy{}))))
	g.Expect(hits.Load()).To(BeZero())
	g.Expect(get(WithDialer(context.Background(), NewDialer(AllowLoopback())))).To(Succeed())
	// A connection made under one policy serves no request under another.
	expectRefused(g, get(WithDialer(context.Background(), NewDialer(Policy{}))))
	g.Expect(get(context.Background())).To(Succeed())
	g.Expect(hits.Load()).To(BeEquivalentTo(2))
}

func TestProxyChecksTheDestination(t *testing.T) {
	g := NewWithT(t)
	proxyURL, _ := url.Parse("http://proxy.example:3128")
	d := NewDialer(Policy{})
	d.proxy = func(*http.Request) (*url.URL, error) { return proxyURL, nil }
	for _, target := range []string{"http://169.254.169.254/latest/meta-data", "http://localhost:8080/", "http://[::1]/"} {
		req, _ := http.NewRequest(http.MethodGet, target, nil)
		_, err := d.Proxy(req)
		expectRefused(g, err)
	}
	req, _ := http.NewRequest(http.MethodGet, "http://203.0.113.7/index.yaml", nil)
	g.Expect(d.Proxy(req)).To(Equal(proxyURL))

	d.proxy = func(*http.Request) (*url.URL, error) { return nil, nil }
	req, _ = http.NewRequest(http.MethodGet, "http://169.254.169.254/", nil)
	g.Expect(d.Proxy(req)).To(BeNil(), "without a proxy, the dial checks")
}

func TestProxyURLDialsUnderThePolicy(t *testing.T) {
	g := NewWithT(t)
	denied, allowed := listen(t, "127.0.0.1:0"), listen(t, "127.0.0.2:0")
	u, err := url.Parse(NewDialer(Policy{Allow: prefixes("127.0.0.0/8"), Deny: prefixes("127.0.0.1/32")}).ProxyURL())
	g.Expect(err).NotTo(HaveOccurred())
	pd, err := proxy.FromURL(u, proxy.Direct)
	g.Expect(err).NotTo(HaveOccurred())
	cd, ok := pd.(proxy.ContextDialer)
	g.Expect(ok).To(BeTrue())

	_, err = cd.DialContext(context.Background(), "tcp", denied.Addr().String())
	expectRefused(g, err)
	conn, err := cd.DialContext(context.Background(), "tcp", allowed.Addr().String())
	g.Expect(err).NotTo(HaveOccurred())
	_ = conn.Close()
	g.Eventually(allowed.n.Load).Should(BeEquivalentTo(1))
	g.Expect(denied.n.Load()).To(BeZero())

	var none *Dialer
	g.Expect(none.ProxyURL()).To(BeEmpty())
}

func TestForTenant(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	plain := errors.New("connection reset")
	g.Expect(ForTenant(ctx, plain)).To(BeIdenticalTo(plain))
	g.Expect(ForTenant(ctx, nil)).To(Succeed())

	_, err := NewDialer(Policy{}).DialContext(ctx, "tcp", "169.254.169.254:80")
	got := ForTenant(ctx, &url.Error{Op: "Get", URL: "http://169.254.169.254/", Err: err})
	g.Expect(got).To(MatchError(Message))
	g.Expect(outcome.IsStalling(got)).To(BeTrue())
	g.Expect(outcome.ReasonOf(got, "")).To(Equal(fleet.ReasonDestinationRefused))
	g.Expect(got.Error()).NotTo(ContainSubstring("169.254"))
}

// go-git wraps the error of its fetch's second request in one that does not
// unwrap (plumbing.UnexpectedError): the refusal is still found, by its
// text, and its detail still kept from the tenant.
func TestForTenantFindsARefusalThatDoesNotUnwrap(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	_, err := NewDialer(Policy{}).DialContext(ctx, "tcp", "169.254.169.254:80")
	opaque := errors.New("unexpected client error: " + err.Error())
	g.Expect(errors.Is(opaque, ErrRefused)).To(BeFalse())
	got := ForTenant(ctx, opaque)
	g.Expect(got).To(MatchError(Message))
	g.Expect(outcome.ReasonOf(got, "")).To(Equal(fleet.ReasonDestinationRefused))
	g.Expect(got.Error()).NotTo(ContainSubstring("169.254"))
}
