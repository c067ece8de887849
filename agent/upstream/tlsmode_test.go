package upstream

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"

	"github.com/gitfleet/fleet/internal/agentmanifest"
)

// systemStoreCert is the certificate of a server only the "system's store"
// trusts: TestMain points SSL_CERT_FILE (which Go reads on Linux, once per
// process) at it before any test runs.
var systemStoreCert tls.Certificate

func TestMain(m *testing.M) {
	cert, certPEM, err := selfSigned()
	if err != nil {
		panic(err)
	}
	systemStoreCert = cert
	dir, err := os.MkdirTemp("", "system-store")
	if err != nil {
		panic(err)
	}
	file := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(file, certPEM, 0o600); err != nil {
		panic(err)
	}
	_ = os.Setenv("SSL_CERT_FILE", file)
	_ = os.Setenv("SSL_CERT_DIR", dir)
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// selfSigned makes a self-signed certificate for 127.0.0.1.
func selfSigned() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "system-store"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	cert, err := tls.X509KeyPair(certPEM, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}))
	return cert, certPEM, err
}

// The agent's TLS mode: strict trusts only the CA it was given;
// system-store trusts the system's store too, and still the given CA; a
// transport wrapper of the config (the rotating token's) keeps working.
func TestWithTLSMode(t *testing.T) {
	g := NewWithT(t)
	headers := make(chan string, 10)
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		headers <- r.Header.Get("X-Wrapped")
		w.WriteHeader(http.StatusNoContent)
	})
	// given: signed by the CA the agent was given (httptest's).
	given := httptest.NewTLSServer(handler)
	defer given.Close()
	givenCA := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: given.Certificate().Raw})
	// public: signed by a CA only the system's store holds.
	public := httptest.NewUnstartedServer(handler)
	public.TLS = &tls.Config{Certificates: []tls.Certificate{systemStoreCert}, MinVersion: tls.VersionTLS12}
	public.StartTLS()
	defer public.Close()

	get := func(url, mode string) error {
		cfg := &rest.Config{Host: url, TLSClientConfig: rest.TLSClientConfig{CAData: givenCA}}
		cfg.WrapTransport = func(rt http.RoundTripper) http.RoundTripper {
			return roundTripperFunc(func(r *http.Request) (*http.Response, error) {
				r = r.Clone(r.Context())
				r.Header.Set("X-Wrapped", "yes")
				return rt.RoundTrip(r)
			})
		}
		hc, err := rest.HTTPClientFor(WithTLSMode(cfg, mode))
		if err != nil {
			return err
		}
		resp, err := hc.Get(url)
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusNoContent))
		g.Expect(<-headers).To(Equal("yes"), "the config's own transport wrapper still runs")
		return nil
	}

	for _, mode := range []string{"", agentmanifest.TLSModeStrict} {
		g.Expect(get(given.URL, mode)).To(Succeed(), "mode %q: the given CA", mode)
		g.Expect(get(public.URL, mode)).To(MatchError(ContainSubstring("certificate")), "mode %q: the system's store is not trusted", mode)
	}
	g.Expect(get(given.URL, agentmanifest.TLSModeSystemStore)).To(Succeed(), "system-store: the given CA still")
	g.Expect(get(public.URL, agentmanifest.TLSModeSystemStore)).To(Succeed(), "system-store: the system's store as well")

	// The config is copied, never changed.
	cfg := &rest.Config{Host: given.URL, TLSClientConfig: rest.TLSClientConfig{CAData: givenCA}}
	g.Expect(WithTLSMode(cfg, agentmanifest.TLSModeSystemStore)).NotTo(BeIdenticalTo(cfg))
	g.Expect(cfg.Transport).To(BeNil())
	g.Expect(cfg.CAData).To(Equal(givenCA))
	g.Expect(WithTLSMode(cfg, agentmanifest.TLSModeStrict)).To(BeIdenticalTo(cfg), "strict: client-go's own TLS")
}
