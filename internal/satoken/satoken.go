// Package satoken mints ServiceAccount tokens with the TokenRequest API. Tokens
// are bound to their ServiceAccount: deleting the ServiceAccount revokes every
// token minted for it, which is how registration tokens expire and how old agent
// credentials are revoked on re-registration.
package satoken

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MinLifetime is the shortest lifetime the API server grants a token.
const MinLifetime = 10 * time.Minute

// Mint returns a token for the ServiceAccount namespace/name valid for
// lifetime (at least MinLifetime; the API server may shorten it to its
// configured maximum).
func Mint(ctx context.Context, c client.Client, namespace, name string, lifetime time.Duration) (string, error) {
	if lifetime < MinLifetime {
		lifetime = MinLifetime
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name}}
	seconds := int64(lifetime / time.Second)
	tr := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: &seconds}}
	if err := c.SubResource("token").Create(ctx, sa, tr); err != nil {
		return "", fmt.Errorf("requesting a token for service account %s/%s: %w", namespace, name, err)
	}
	return tr.Status.Token, nil
}

// Claims are the claims of a ServiceAccount token needed to tell whose it is
// and when it expires. They are read without verifying the signature: the
// API server verifies it on every request.
type Claims struct {
	Namespace, ServiceAccount string
	IssuedAt, Expiry          time.Time
}

// Lifetime is how long the token was minted to be valid.
func (c Claims) Lifetime() time.Duration { return c.Expiry.Sub(c.IssuedAt) }

// Parse reads the claims of an expiring ServiceAccount token (a JWT).
func Parse(token string) (Claims, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return Claims{}, errors.New("the token is not a JWT")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return Claims{}, fmt.Errorf("the token has an unreadable payload (%v)", err)
	}
	var claims struct {
		Subject  string `json:"sub"`
		IssuedAt int64  `json:"iat"`
		Expiry   int64  `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return Claims{}, fmt.Errorf("the token has unreadable claims (%v)", err)
	}
	sa := strings.Split(claims.Subject, ":")
	if len(sa) != 4 || sa[0] != "system" || sa[1] != "serviceaccount" || claims.Expiry == 0 || claims.IssuedAt == 0 {
		return Claims{}, fmt.Errorf("the token is not an expiring ServiceAccount token (subject %q)", claims.Subject)
	}
	return Claims{
		Namespace: sa[2], ServiceAccount: sa[3],
		IssuedAt: time.Unix(claims.IssuedAt, 0), Expiry: time.Unix(claims.Expiry, 0),
	}, nil
}
