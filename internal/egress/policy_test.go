package egress

import (
	"errors"
	"net/netip"
	"testing"

	. "github.com/onsi/gomega"
)

func prefixes(s ...string) []netip.Prefix {
	out := make([]netip.Prefix, len(s))
	for i, v := range s {
		out[i] = netip.MustParsePrefix(v)
	}
	return out
}

func TestPolicyCheck(t *testing.T) {
	wide := Policy{Allow: prefixes("127.0.0.0/8"), Deny: prefixes("127.0.0.77/32", "10.0.0.0/8")}
	cases := []struct {
		name    string
		policy  Policy
		ip      string
		refused bool
	}{
		{"public IPv4", Policy{}, "203.0.113.7", false},
		{"public IPv6", Policy{}, "2001:db8::1", false},
		{"private network, not refused by default", Policy{}, "10.1.2.3", false},
		{"loopback", Policy{}, "127.0.0.1", true},
		{"other loopback address", Policy{}, "127.1.2.3", true},
		{"IPv6 loopback", Policy{}, "::1", true},
		{"loopback written as IPv6", Policy{}, "::ffff:127.0.0.1", true},
		{"cloud metadata", Policy{}, "169.254.169.254", true},
		{"metadata written as IPv6", Policy{}, "::ffff:169.254.169.254", true},
		{"IPv6 link-local", Policy{}, "fe80::1", true},
		{"IPv6 link-local with a zone", Policy{}, "fe80::1%eth0", true},
		{"unspecified", Policy{}, "0.0.0.0", true},
		{"this network", Policy{}, "0.1.2.3", true},
		{"IPv6 unspecified", Policy{}, "::", true},
		{"multicast", Policy{}, "224.0.0.1", true},
		{"IPv6 multicast", Policy{}, "ff02::1", true},
		{"broadcast", Policy{}, "255.255.255.255", true},
		{"allowed loopback", AllowLoopback(), "127.0.0.1", false},
		{"allowed IPv6 loopback", AllowLoopback(), "::1", false},
		{"allowing loopback keeps metadata refused", AllowLoopback(), "169.254.169.254", true},
		{"deny wins over allow", wide, "127.0.0.77", true},
		{"the rest of the allowed prefix", wide, "127.0.0.1", false},
		{"deny narrows beyond the defaults", wide, "10.9.9.9", true},
		{"deny holds the IPv4 form of a mapped address", wide, "::ffff:10.0.0.1", true},
		{"allow reopens metadata when asked", Policy{Allow: prefixes("169.254.169.254/32")}, "169.254.169.254", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			err := tc.policy.Check(netip.MustParseAddr(tc.ip))
			if !tc.refused {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(HaveOccurred())
			g.Expect(errors.Is(err, ErrRefused)).To(BeTrue())
		})
	}
}

func TestCheckInvalidAddress(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Policy{}.Check(netip.Addr{})).To(MatchError(ErrRefused))
}

func TestParsePrefixes(t *testing.T) {
	cases := []struct {
		in      []string
		want    []netip.Prefix
		wantErr bool
	}{
		{in: nil, want: []netip.Prefix{}},
		{in: []string{"10.0.0.0/8", " fd00::/8 "}, want: prefixes("10.0.0.0/8", "fd00::/8")},
		{in: []string{"169.254.169.254"}, want: prefixes("169.254.169.254/32")},
		{in: []string{"::1"}, want: prefixes("::1/128")},
		{in: []string{"10.1.2.3/8"}, want: prefixes("10.0.0.0/8")},
		{in: []string{"::ffff:127.0.0.0/104"}, want: prefixes("127.0.0.0/8")},
		{in: []string{"", "127.0.0.1"}, want: prefixes("127.0.0.1/32")},
		{in: []string{"example.com"}, wantErr: true},
		{in: []string{"10.0.0.0/33"}, wantErr: true},
	}
	for _, tc := range cases {
		g := NewWithT(t)
		got, err := ParsePrefixes(tc.in)
		if tc.wantErr {
			g.Expect(err).To(MatchError(ContainSubstring("neither a CIDR")), "%v", tc.in)
			continue
		}
		g.Expect(err).NotTo(HaveOccurred(), "%v", tc.in)
		g.Expect(got).To(Equal(tc.want), "%v", tc.in)
	}
}
