package upstream

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/backoff"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/satoken"
)

// Credential rotation. The agent's credential is a token of the
// ServiceAccount its registration made. The manager mints the next token of
// that ServiceAccount before the current one is due, and puts it in the
// Secret fleet.RenewedCredentialSecretName of the agent's cluster namespace,
// which the agent may read by name (it may mint no token itself: that right
// would need a Role per agent). When less than RotateOptions.Before of its
// token's lifetime remains (a third by default), the agent reads that
// Secret, takes the token there if it is of its own ServiceAccount and
// expires later than the one in use, checks that the manager accepts it,
// stores it in its fleet-agent Secret and switches every upstream client to
// it; requests in flight finish with the old one, so the agent never stops
// reporting.
//
// ServiceAccount tokens cannot be revoked one by one: the old token is left
// to expire at its own exp, at most one lifetime after it was minted (the
// manager's --agent-credential-lifetime). Deleting the registration (a new
// registration of the cluster, or deleting the Cluster) deletes the
// ServiceAccount and with it every token ever minted for it.

// minRotationInterval bounds how often the agent rotates, whatever Before
// says: a Before longer than the lifetime must not make it spin.
const minRotationInterval = 5 * time.Second

// TokenClaims are the claims of a ServiceAccount token the agent needs to
// rotate it.
type TokenClaims = satoken.Claims

// ParseToken reads the claims of a ServiceAccount token (a JWT).
func ParseToken(token string) (TokenClaims, error) {
	c, err := satoken.Parse(token)
	if err != nil {
		return c, fmt.Errorf("the credential's token cannot be rotated (%v): register the cluster again with a fresh registration token", err)
	}
	return c, nil
}

// currentToken is the token the upstream clients of one credential send. It
// is read on every request, so a rotation reaches every client at once.
type currentToken struct {
	mu    sync.RWMutex
	token string
}

func (t *currentToken) get() string {
	t.mu.RLock()
	defer t.mu.RUnlock()
	return t.token
}

func (t *currentToken) set(token string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.token = token
}

// wrap is a rest.Config WrapTransport that sets the current token.
func (t *currentToken) wrap(rt http.RoundTripper) http.RoundTripper {
	return roundTripperFunc(func(req *http.Request) (*http.Response, error) {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+t.get())
		return rt.RoundTrip(req)
	})
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// RotateOptions configure credential rotation.
type RotateOptions struct {
	// Namespace and Local are where the credential is stored (the
	// fleet-agent Secret of the agent's system namespace).
	Namespace string
	Local     client.Client
	// Before is how much of the token's lifetime may remain at most when
	// it is renewed; 0 means a third of its lifetime.
	Before time.Duration
	// MinBackoff and MaxBackoff bound retries of a failed rotation.
	MinBackoff, MaxBackoff time.Duration
	// Now is the clock (tests may replace it).
	Now func() time.Time
	// OnRotate, when set, runs after each rotation: the agent rotates its
	// sealing key with its credential.
	OnRotate func(context.Context) error
}

// Rotator renews a credential before it expires.
type Rotator struct {
	cred *Credential
	o    RotateOptions
}

// NewRotator makes cred's REST configs follow rotations: from now on they
// send whatever token the Rotator holds. Call it before building clients.
func NewRotator(cred *Credential, o RotateOptions) *Rotator {
	if cred.current == nil {
		cred.current = &currentToken{token: cred.Token}
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Rotator{cred: cred, o: o}
}

// Run rotates the credential whenever it is due, until ctx ends. Failures
// are retried with backoff: the old token stays in use until it expires.
func (r *Rotator) Run(ctx context.Context) {
	backoff.Repeat(ctx, backoff.New(r.o.MinBackoff, r.o.MaxBackoff), 0, "Could not rotate the agent credential, retrying", r.Step)
}

// Step rotates the credential when it is due and says when to look again.
func (r *Rotator) Step(ctx context.Context) (time.Duration, error) {
	claims, err := ParseToken(r.cred.CurrentToken())
	if err != nil {
		return 0, err
	}
	if wait := r.due(claims).Sub(r.o.Now()); wait > 0 {
		return wait, nil
	}
	token, err := r.request(ctx, claims)
	if err != nil {
		return 0, err
	}
	next := *r.cred
	next.Token, next.current = token, nil
	// Switch only to a token the manager accepts: a rotation never costs
	// the agent its connection.
	if err := Check(ctx, &next); err != nil {
		return 0, fmt.Errorf("the manager does not accept the new token: %w", err)
	}
	if err := Store(ctx, r.o.Local, r.o.Namespace, &next); err != nil {
		return 0, err
	}
	r.cred.current.set(token)
	if r.o.OnRotate != nil {
		if err := r.o.OnRotate(ctx); err != nil {
			ctrl.LoggerFrom(ctx).Info("Could not rotate the sealing key with the credential, keeping the current one", "reason", err.Error())
		}
	}
	newClaims, err := ParseToken(token)
	if err != nil {
		return 0, err
	}
	ctrl.LoggerFrom(ctx).Info("Rotated the agent credential", "expires", newClaims.Expiry.UTC(), "previousExpires", claims.Expiry.UTC())
	return max(r.due(newClaims).Sub(r.o.Now()), minRotationInterval), nil
}

// due is when a token is to be renewed.
func (r *Rotator) due(c TokenClaims) time.Time {
	before := r.o.Before
	if before <= 0 {
		before = c.Lifetime() / 3
	}
	return c.Expiry.Add(-before)
}

// request reads the next token the manager put in the agent's cluster
// namespace, and takes it when it is of the same ServiceAccount as c and
// expires later.
func (r *Rotator) request(ctx context.Context, c TokenClaims) (string, error) {
	upstream, err := NewClient(r.cred.RESTConfig())
	if err != nil {
		return "", err
	}
	secret := &corev1.Secret{}
	key := types.NamespacedName{Namespace: r.cred.ClusterNamespace, Name: fleet.RenewedCredentialSecretName}
	if err := upstream.Get(ctx, key, secret); err != nil {
		if apierrors.IsNotFound(err) {
			return "", fmt.Errorf("the manager has not issued the next credential yet (no secret %s): it does before a third of the token's lifetime remains; is the manager running and up to date?", key)
		}
		return "", explainRotation(err)
	}
	token := string(secret.Data[fleet.CredentialTokenKey])
	next, err := satoken.Parse(token)
	if err != nil {
		return "", fmt.Errorf("secret %s holds no usable token: %w", key, err)
	}
	if next.Namespace != c.Namespace || next.ServiceAccount != c.ServiceAccount || !next.Expiry.After(c.Expiry) {
		return "", fmt.Errorf("the manager has not issued the next credential yet (secret %s holds a token of %s/%s expiring %s)", key,
			next.Namespace, next.ServiceAccount, next.Expiry.UTC())
	}
	return token, nil
}

func explainRotation(err error) error {
	const what = "reading the next credential the manager issued"
	switch {
	case apierrors.IsForbidden(err):
		return fmt.Errorf("%s: %w: %v: upgrade the manager", what, ErrRejected, err)
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("%s: %w: %v: the credential has expired or was revoked; apply a fresh registration token (fleet install agent-token) and restart the agent", what, ErrRejected, err)
	}
	return fmt.Errorf("%s: %w", what, err)
}
