package egress

import (
	"net/url"

	"golang.org/x/net/proxy"
)

// proxyScheme names, for golang.org/x/net/proxy, a "proxy" that is a
// Dialer connecting directly under the policy its URL holds.
const proxyScheme = "egress-policy"

func init() {
	proxy.RegisterDialerType(proxyScheme, fromProxyURL)
}

// ProxyURL is a URL that golang.org/x/net/proxy.FromURL turns into a Dialer
// with d's policy, connecting directly: for clients that take another
// dialer only as a proxy URL, such as go-git's SSH transport (its
// transport.ProxyOptions). "" for a nil Dialer.
func (d *Dialer) ProxyURL() string {
	if d == nil {
		return ""
	}
	q := url.Values{}
	for _, pf := range d.policy.Allow {
		q.Add("allow", pf.String())
	}
	for _, pf := range d.policy.Deny {
		q.Add("deny", pf.String())
	}
	return (&url.URL{Scheme: proxyScheme, Host: "direct", RawQuery: q.Encode()}).String()
}

// fromProxyURL is the Dialer of a ProxyURL; it never forwards.
func fromProxyURL(u *url.URL, _ proxy.Dialer) (proxy.Dialer, error) {
	q := u.Query()
	allow, err := ParsePrefixes(q["allow"])
	if err != nil {
		return nil, err
	}
	deny, err := ParsePrefixes(q["deny"])
	if err != nil {
		return nil, err
	}
	return NewDialer(Policy{Allow: allow, Deny: deny}), nil
}
