package egress

import (
	"fmt"
	"net/netip"
	"strings"
)

// defaultDenied are the addresses refused unless a Policy allows them: what
// only the manager's own host can reach, or what is no single host.
var defaultDenied = []netip.Prefix{
	netip.MustParsePrefix("127.0.0.0/8"),        // IPv4 loopback
	netip.MustParsePrefix("::1/128"),            // IPv6 loopback
	netip.MustParsePrefix("169.254.0.0/16"),     // IPv4 link-local: cloud metadata (169.254.169.254)
	netip.MustParsePrefix("fe80::/10"),          // IPv6 link-local
	netip.MustParsePrefix("0.0.0.0/8"),          // "this network": 0.0.0.0 reaches the local host
	netip.MustParsePrefix("::/128"),             // IPv6 unspecified
	netip.MustParsePrefix("224.0.0.0/4"),        // IPv4 multicast
	netip.MustParsePrefix("ff00::/8"),           // IPv6 multicast
	netip.MustParsePrefix("255.255.255.255/32"), // IPv4 broadcast
}

// DefaultDenied returns the prefixes a zero Policy refuses: loopback,
// link-local, unspecified, multicast and broadcast, IPv4 and IPv6.
func DefaultDenied() []netip.Prefix {
	return append([]netip.Prefix(nil), defaultDenied...)
}

// Policy says which addresses the manager may connect to on a tenant's
// behalf. An address is refused when Deny holds it; otherwise allowed when
// Allow holds it; otherwise refused when DefaultDenied holds it; otherwise
// allowed. So Allow only widens (it reopens part of the defaults) and Deny
// only narrows, and Deny wins over Allow: Allow 127.0.0.0/8 with Deny
// 127.0.0.1/32 reaches every loopback address but 127.0.0.1. The zero
// Policy refuses the defaults.
type Policy struct {
	// Allow lists addresses connected to even though DefaultDenied holds
	// them (e.g. 127.0.0.0/8 for a test or a demo serving git on loopback).
	Allow []netip.Prefix
	// Deny lists addresses refused besides the defaults (e.g. the pod and
	// service networks, or 10.0.0.0/8), whatever Allow says.
	Deny []netip.Prefix
}

// AllowLoopback is a Policy that allows the IPv4 and IPv6 loopback
// addresses and refuses the other defaults: for tests and demos whose git
// and chart servers listen on loopback.
func AllowLoopback() Policy {
	return Policy{Allow: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}
}

// Check returns nil when the policy allows a connection to ip, else a
// *RefusedError naming the rule that refuses it. An IPv4 address written as
// IPv6 (::ffff:127.0.0.1) is checked as the IPv4 address it is.
func (p Policy) Check(ip netip.Addr) error {
	if rule := p.refusal(ip); rule != "" {
		return &RefusedError{Addr: ip.String(), Rule: rule}
	}
	return nil
}

// refusal is why ip is refused, "" when it is allowed.
func (p Policy) refusal(ip netip.Addr) string {
	ip = ip.Unmap().WithZone("")
	if !ip.IsValid() {
		return "not an IP address"
	}
	if pf, ok := match(p.Deny, ip); ok {
		return "denied by " + pf.String() + " (--egress-deny-cidrs)"
	}
	if _, ok := match(p.Allow, ip); ok {
		return ""
	}
	if pf, ok := match(defaultDenied, ip); ok {
		return "in " + pf.String() + ", refused by default (--egress-allow-cidrs allows it)"
	}
	return ""
}

// String shows the policy in a log line.
func (p Policy) String() string {
	return fmt.Sprintf("allow=%s deny=%s default-denied=%s", join(p.Allow), join(p.Deny), join(defaultDenied))
}

func match(prefixes []netip.Prefix, ip netip.Addr) (netip.Prefix, bool) {
	for _, pf := range prefixes {
		if pf.Contains(ip) {
			return pf, true
		}
	}
	return netip.Prefix{}, false
}

func join(prefixes []netip.Prefix) string {
	if len(prefixes) == 0 {
		return "none"
	}
	s := make([]string, len(prefixes))
	for i, pf := range prefixes {
		s[i] = pf.String()
	}
	return strings.Join(s, ",")
}

// ParsePrefixes reads CIDRs (10.0.0.0/8, fd00::/8) or single addresses
// (169.254.169.254, taken as /32 or /128), as the --egress-allow-cidrs and
// --egress-deny-cidrs flags hold them. An IPv4-mapped IPv6 prefix is kept
// as the IPv4 prefix it is, since Check compares IPv4 addresses so.
func ParsePrefixes(values []string) ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(values))
	for _, v := range values {
		v = strings.TrimSpace(v)
		if v == "" {
			continue
		}
		pf, err := parsePrefix(v)
		if err != nil {
			return nil, fmt.Errorf("%q is neither a CIDR (10.0.0.0/8, fd00::/8) nor an IP address", v)
		}
		out = append(out, pf)
	}
	return out, nil
}

func parsePrefix(v string) (netip.Prefix, error) {
	if !strings.Contains(v, "/") {
		ip, err := netip.ParseAddr(v)
		if err != nil {
			return netip.Prefix{}, err
		}
		ip = ip.Unmap()
		return netip.PrefixFrom(ip, ip.BitLen()), nil
	}
	pf, err := netip.ParsePrefix(v)
	if err != nil {
		return netip.Prefix{}, err
	}
	if a := pf.Addr(); a.Is4In6() && pf.Bits() >= 96 {
		pf = netip.PrefixFrom(a.Unmap(), pf.Bits()-96)
	}
	return pf.Masked(), nil
}
