package upstream

import (
	"crypto/x509"
	"net/http"

	"k8s.io/client-go/rest"

	"github.com/gitfleet/fleet/internal/agentmanifest"
)

// WithTLSMode returns cfg trusting the manager's API server as mode says
// (the agent ConfigMap's agentTLSMode, Fleet's values): strict, the
// default, trusts only the CA the agent was given (client-go's own
// behaviour; the system's store when it was given none); system-store
// trusts the system's store as well as that CA, so that a manager moving to
// a publicly signed certificate stays reachable.
func WithTLSMode(cfg *rest.Config, mode string) *rest.Config {
	if mode != agentmanifest.TLSModeSystemStore || len(cfg.CAData) == 0 {
		return cfg
	}
	cfg = rest.CopyConfig(cfg)
	ca := cfg.CAData
	inner := cfg.WrapTransport
	cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
		rt = trustSystemStore(rt, ca)
		if inner != nil {
			rt = inner(rt)
		}
		return rt
	}
	return cfg
}

// trustSystemStore gives the TLS transport client-go built (shared among
// configs alike, so it is copied, never changed) the system's CAs besides
// ca.
func trustSystemStore(rt http.RoundTripper, ca []byte) http.RoundTripper {
	t, ok := rt.(*http.Transport)
	if !ok || t.TLSClientConfig == nil {
		return rt
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	pool.AppendCertsFromPEM(ca)
	t = t.Clone()
	t.TLSClientConfig.RootCAs = pool
	return t
}
