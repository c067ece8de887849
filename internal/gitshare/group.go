package gitshare

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"slices"

	"github.com/gitfleet/fleet/internal/gitfetch"
)

// Group is the identity of the GitRepos that may share git traffic: a hash
// of the URL, the branch and revision, and everything that authenticates
// the requests (the Secret's type and data, CA bundle, TLS verification,
// SSH host keys). Two option sets with the same Group get the same answers
// from the remote.
func Group(o gitfetch.Options) string {
	h := sha256.New()
	field(h, "v1")
	field(h, o.URL)
	field(h, o.Branch)
	field(h, o.Revision)
	if s := o.Secret; s != nil {
		field(h, "secret")
		field(h, string(s.Type))
		keys := make([]string, 0, len(s.Data)+len(s.StringData))
		for k := range s.Data {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			field(h, k)
			field(h, string(s.Data[k]))
		}
		// StringData is not read by the fetcher, but a Secret built in
		// process may carry it: it is part of the identity too.
		skeys := make([]string, 0, len(s.StringData))
		for k := range s.StringData {
			skeys = append(skeys, k)
		}
		slices.Sort(skeys)
		for _, k := range skeys {
			field(h, "s:"+k)
			field(h, s.StringData[k])
		}
	} else {
		field(h, "anonymous")
	}
	field(h, string(o.CABundle))
	if o.InsecureSkipTLSVerify {
		field(h, "insecure")
	} else {
		field(h, "verify")
	}
	field(h, string(o.KnownHosts))
	return "g-" + hex.EncodeToString(h.Sum(nil))[:32]
}

// field writes s length-prefixed, so that no two different field lists
// hash alike.
func field(h hash.Hash, s string) {
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], uint64(len(s)))
	h.Write(n[:])
	h.Write([]byte(s))
}
