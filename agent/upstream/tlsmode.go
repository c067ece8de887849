package upstream

import (
	"crypto/sha256"
	"crypto/x509"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"

	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport"

	"github.com/gitfleet/fleet/internal/agentmanifest"
)

// WithTLSMode returns cfg trusting the manager's API server as mode says
// (the agent ConfigMap's agentTLSMode, Fleet's values): strict, the
// default, trusts only the CA the agent was given (client-go's own
// behaviour; the system's store when it was given none); system-store
// trusts the system's store as well as that CA, so that a manager moving to
// a publicly signed certificate stays reachable.
//
// client-go has no such option, and the transport it builds is not
// reachable from a WrapTransport (it is wrapped in a type of its own), so
// system-store gives cfg a transport of ours, with client-go's TLS settings
// and the system's CAs added; cfg's WrapTransport (the rotating token) still
// applies on top. A cfg whose TLS settings do not load is returned as it is,
// and client-go reports the error when the client is built.
func WithTLSMode(cfg *rest.Config, mode string) *rest.Config {
	if mode != agentmanifest.TLSModeSystemStore || (len(cfg.CAData) == 0 && cfg.CAFile == "") || cfg.Transport != nil {
		return cfg
	}
	rt, err := systemStoreTransport(cfg)
	if err != nil {
		return cfg
	}
	cfg = rest.CopyConfig(cfg)
	// client-go refuses a Transport beside TLS settings: they are in rt.
	cfg.TLSClientConfig = rest.TLSClientConfig{}
	cfg.Transport = rt
	cfg.Proxy, cfg.Dial = nil, nil
	return cfg
}

// systemStoreTransports are the transports systemStoreTransport made, by
// their TLS settings, shared as client-go shares its own: a credential's
// config is built again on every rotation.
var systemStoreTransports sync.Map

// systemStoreTransport is an HTTP transport with cfg's TLS settings (its
// CA, client certificate, server name) that trusts the system's CAs as well
// as cfg's.
func systemStoreTransport(cfg *rest.Config) (http.RoundTripper, error) {
	tc, err := cfg.TransportConfig()
	if err != nil {
		return nil, err
	}
	tlsConfig, err := transport.TLSConfigFor(tc)
	if err != nil || tlsConfig == nil {
		return nil, err
	}
	// Keyed by what shapes the connection; a config with a dialer or proxy
	// function of its own (which cannot be compared) is not shared.
	h := sha256.New()
	for _, b := range [][]byte{tc.TLS.CAData, []byte(tc.TLS.CAFile), tc.TLS.CertData, []byte(tc.TLS.CertFile),
		tc.TLS.KeyData, []byte(tc.TLS.KeyFile), []byte(tc.TLS.ServerName)} {
		_, _ = h.Write(b)
		_, _ = h.Write([]byte{0})
	}
	key := string(h.Sum(nil))
	shared := cfg.Dial == nil && cfg.Proxy == nil
	if shared {
		if rt, ok := systemStoreTransports.Load(key); ok {
			return rt.(http.RoundTripper), nil
		}
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		pool = x509.NewCertPool()
	}
	// cfg's CA (TLSConfigFor read a CAFile into CAData) beside the system's.
	if !pool.AppendCertsFromPEM(tc.TLS.CAData) {
		return nil, errors.New("no certificate in the CA data")
	}
	tlsConfig.RootCAs = pool
	dial := cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	}
	proxy := cfg.Proxy
	if proxy == nil {
		proxy = http.ProxyFromEnvironment
	}
	rt := utilnet.SetTransportDefaults(&http.Transport{
		Proxy:               proxy,
		TLSHandshakeTimeout: 10 * time.Second,
		TLSClientConfig:     tlsConfig,
		MaxIdleConnsPerHost: 25,
		DialContext:         dial,
		DisableCompression:  cfg.DisableCompression,
	})
	if shared {
		actual, _ := systemStoreTransports.LoadOrStore(key, rt)
		return actual.(http.RoundTripper), nil
	}
	return rt, nil
}
