package upstream

import (
	"encoding/base64"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"
)

func jwt(t *testing.T, claims map[string]any) string {
	t.Helper()
	payload, err := json.Marshal(claims)
	if err != nil {
		t.Fatalf("encoding the claims: %v", err)
	}
	enc := base64.RawURLEncoding.EncodeToString
	return enc([]byte(`{"alg":"RS256"}`)) + "." + enc(payload) + ".c2ln"
}

func TestParseToken(t *testing.T) {
	iat := time.Unix(1700000000, 0)
	for _, tc := range []struct {
		name  string
		token string
		want  *TokenClaims
	}{
		{"service account token", jwt(t, map[string]any{"sub": "system:serviceaccount:cluster-ns:request-1", "iat": iat.Unix(), "exp": iat.Add(time.Hour).Unix()}),
			&TokenClaims{Namespace: "cluster-ns", ServiceAccount: "request-1", IssuedAt: iat, Expiry: iat.Add(time.Hour)}},
		{"not a JWT", "opaque-token", nil},
		{"bad payload", "a.!!!.c", nil},
		{"not a service account", jwt(t, map[string]any{"sub": "alice", "iat": iat.Unix(), "exp": iat.Unix() + 1}), nil},
		{"never expires", jwt(t, map[string]any{"sub": "system:serviceaccount:ns:sa", "iat": iat.Unix()}), nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseToken(tc.token)
			if tc.want == nil {
				g.Expect(err).To(MatchError(ContainSubstring("register the cluster again")))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(*tc.want))
			g.Expect(got.Lifetime()).To(Equal(time.Hour))
		})
	}
}

func TestRotationDue(t *testing.T) {
	iat := time.Unix(1700000000, 0)
	c := TokenClaims{IssuedAt: iat, Expiry: iat.Add(30 * time.Hour)}
	for _, tc := range []struct {
		before time.Duration
		want   time.Time
	}{
		{0, iat.Add(20 * time.Hour)}, // a third of the lifetime remains
		{time.Hour, iat.Add(29 * time.Hour)},
		{30 * time.Hour, iat},
	} {
		r := &Rotator{o: RotateOptions{Before: tc.before}}
		NewWithT(t).Expect(r.due(c)).To(Equal(tc.want), "before %s", tc.before)
	}
}

func TestRESTConfigFollowsRotation(t *testing.T) {
	g := NewWithT(t)
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen = append(seen, r.Header.Get("Authorization"))
	}))
	defer srv.Close()
	cred := &Credential{APIServerURL: srv.URL, Token: "old"}
	g.Expect(cred.RESTConfig().BearerToken).To(Equal("old"), "without a rotator the token is fixed")

	NewRotator(cred, RotateOptions{})
	cfg := cred.RESTConfig()
	g.Expect(cfg.BearerToken).To(BeEmpty(), "the rotating token is the only Authorization")
	// Through client-go's own transport, as every upstream client sends.
	hc, err := rest.HTTPClientFor(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	get := func() {
		resp, err := hc.Get(srv.URL)
		g.Expect(err).NotTo(HaveOccurred())
		resp.Body.Close()
	}
	get()
	cred.current.set("new")
	get()
	g.Expect(seen).To(Equal([]string{"Bearer old", "Bearer new"}))
	g.Expect(cred.CurrentToken()).To(Equal("new"))
}
