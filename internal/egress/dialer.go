package egress

import (
	"context"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"syscall"
	"time"
)

// Dial timeouts, as net/http's default transport has them.
const (
	dialTimeout = 30 * time.Second
	keepAlive   = 30 * time.Second
)

// Dialer connects only where its Policy allows. It checks the address of
// every connection as the connection is made (in net.Dialer's Control hook,
// after DNS resolution), so a redirect, a second request or a name that
// resolves elsewhere the next time is checked again.
//
// A nil *Dialer connects anywhere, as net.Dialer does: what the packages
// that take one do when their caller gives none (`fleet apply`, their own
// tests). The manager gives one to everything it fetches for a tenant.
type Dialer struct {
	policy Policy
	dialer net.Dialer
	// proxy picks the proxy of a request; http.ProxyFromEnvironment unless
	// a test replaces it.
	proxy func(*http.Request) (*url.URL, error)
}

// NewDialer returns a Dialer that connects under p.
func NewDialer(p Policy) *Dialer {
	d := &Dialer{policy: p, proxy: http.ProxyFromEnvironment}
	d.dialer = net.Dialer{Timeout: dialTimeout, KeepAlive: keepAlive, Control: d.control}
	return d
}

// Policy is the policy d connects under; the zero Policy for a nil Dialer,
// which checks nothing.
func (d *Dialer) Policy() Policy {
	if d == nil {
		return Policy{}
	}
	return d.policy
}

// control refuses a connection to an address the policy refuses, before
// anything is sent to it.
func (d *Dialer) control(_, address string, _ syscall.RawConn) error {
	ap, err := netip.ParseAddrPort(address)
	if err != nil {
		return refused(&RefusedError{Addr: address, Rule: "not an IP address and port"})
	}
	if rule := d.policy.refusal(ap.Addr()); rule != "" {
		return refused(&RefusedError{Addr: address, Rule: rule})
	}
	return nil
}

// DialContext connects to addr (host:port; a host name is resolved and
// each of its addresses checked) on network, as net.Dialer does, when the
// policy allows it. A refused address fails with an error that errors.Is
// finds as ErrRefused, and that is Stalling with
// fleet.ReasonDestinationRefused.
func (d *Dialer) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	if d == nil {
		nd := net.Dialer{Timeout: dialTimeout, KeepAlive: keepAlive}
		return nd.DialContext(ctx, network, addr)
	}
	return d.dialer.DialContext(ctx, network, addr)
}

// Dial is DialContext without a context, for golang.org/x/net/proxy.
func (d *Dialer) Dial(network, addr string) (net.Conn, error) {
	return d.DialContext(context.Background(), network, addr)
}

// Proxy is http.ProxyFromEnvironment for a transport dialing through d.
// Through a proxy, d checks only the proxy's address, and the proxy
// connects to the destination: so a request that goes through a proxy is
// refused when its host is an address the policy refuses, or a name that
// resolves to one. A name the manager cannot resolve is left to the proxy,
// which must then enforce the same rules; DNS answers that change between
// this check and the proxy's own lookup are the proxy's to refuse.
func (d *Dialer) Proxy(req *http.Request) (*url.URL, error) {
	if d == nil {
		return http.ProxyFromEnvironment(req)
	}
	u, err := d.proxy(req)
	if err != nil || u == nil {
		return u, err
	}
	if err := d.checkHost(req.Context(), req.URL.Hostname(), req.URL.Port()); err != nil {
		return nil, err
	}
	return u, nil
}

// checkHost refuses host when it is, or resolves to, an address the policy
// refuses.
func (d *Dialer) checkHost(ctx context.Context, host, port string) error {
	addrs := []netip.Addr{}
	if ip, err := netip.ParseAddr(host); err == nil {
		addrs = append(addrs, ip)
	} else if addrs, err = net.DefaultResolver.LookupNetIP(ctx, "ip", host); err != nil {
		return nil //nolint:nilerr // a name the manager cannot resolve is left to the proxy (see Proxy)
	}
	for _, ip := range addrs {
		if rule := d.policy.refusal(ip); rule != "" {
			return refused(&RefusedError{Addr: net.JoinHostPort(ip.String(), port) + " (" + host + ", through a proxy)", Rule: rule})
		}
	}
	return nil
}

// Transport returns a new HTTP transport, as net/http's default one, that
// connects through d (proxies from the environment, checked by Proxy).
// Every redirect to another host dials, so is checked, again.
func (d *Dialer) Transport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = d.DialContext
	tr.Proxy = d.Proxy
	return tr
}

type contextKey struct{}

// WithDialer returns ctx carrying d, for ContextTransport.
func WithDialer(ctx context.Context, d *Dialer) context.Context {
	return context.WithValue(ctx, contextKey{}, d)
}

// FromContext is the Dialer ctx carries, nil when none.
func FromContext(ctx context.Context) *Dialer {
	d, _ := ctx.Value(contextKey{}).(*Dialer)
	return d
}

// ContextTransport returns an HTTP transport for a client that callers
// with different policies share, such as the one go-git keeps for the whole
// process: each request connects through the Dialer its context carries
// (WithDialer; none connects anywhere). Keep-alives are off, so that a
// connection made under one policy never serves a request under another.
func ContextTransport() *http.Transport {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		return FromContext(ctx).DialContext(ctx, network, addr)
	}
	tr.Proxy = func(req *http.Request) (*url.URL, error) {
		return FromContext(req.Context()).Proxy(req)
	}
	tr.DisableKeepAlives = true
	return tr
}
