// Package satoken mints ServiceAccount tokens with the TokenRequest API. Tokens
// are bound to their ServiceAccount: deleting the ServiceAccount revokes every
// token minted for it, which is how registration tokens expire and how old agent
// credentials are revoked on re-registration.
package satoken

import (
	"context"
	"fmt"
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
