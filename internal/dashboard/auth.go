package dashboard

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// User is who a request is from.
type User struct {
	Name   string
	UID    string
	Groups []string
	Extra  map[string]authzv1.ExtraValue
}

// ErrUnauthenticated is returned for a missing, unknown or expired token.
var ErrUnauthenticated = errors.New("the token was not accepted")

// Authenticator turns a request's token into its user.
type Authenticator interface {
	Authenticate(ctx context.Context, token string) (*User, error)
}

// Authorizer says whether a user may list a kind (its resource name, e.g.
// "bundles" for fleet's kinds, or "resource.group" for another group's, as
// ResCAPIClusters) in a namespace.
type Authorizer interface {
	CanList(ctx context.Context, u *User, resource, namespace string) (bool, error)
}

// Secret authenticates the one token it was made with: what `fleet
// dashboard` prints in its URL, so that the dashboard it serves with the
// caller's kubeconfig is the caller's alone.
type Secret string

// Authenticate accepts the secret only.
func (s Secret) Authenticate(_ context.Context, token string) (*User, error) {
	if s == "" || subtle.ConstantTimeCompare([]byte(s), []byte(token)) != 1 {
		return nil, ErrUnauthenticated
	}
	return &User{Name: "kubeconfig"}, nil
}

// AllowAll authorizes everything: for a cache whose credentials are already
// the user's own (`fleet dashboard`).
type AllowAll struct{}

// CanList always allows.
func (AllowAll) CanList(context.Context, *User, string, string) (bool, error) { return true, nil }

// ttlCache remembers answers for a short while, so a page is not a round
// of reviews, and a revoked right or token stops working soon.
type ttlCache[V any] struct {
	mu      sync.Mutex
	ttl     time.Duration
	entries map[string]ttlEntry[V]
}

type ttlEntry[V any] struct {
	v       V
	expires time.Time
}

func newTTLCache[V any](ttl time.Duration) *ttlCache[V] {
	return &ttlCache[V]{ttl: ttl, entries: map[string]ttlEntry[V]{}}
}

func (c *ttlCache[V]) get(k string, now time.Time) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.entries[k]
	if !ok || now.After(e.expires) {
		var zero V
		return zero, false
	}
	return e.v, true
}

// maxEntries bounds each cache; when full, expired entries go, then all.
const maxEntries = 10000

func (c *ttlCache[V]) put(k string, v V, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.entries) >= maxEntries {
		for k, e := range c.entries {
			if now.After(e.expires) {
				delete(c.entries, k)
			}
		}
		if len(c.entries) >= maxEntries {
			c.entries = map[string]ttlEntry[V]{}
		}
	}
	c.entries[k] = ttlEntry[V]{v: v, expires: now.Add(c.ttl)}
}

// reviewTTL is how long a TokenReview's or SubjectAccessReview's answer is
// reused.
const reviewTTL = 10 * time.Second

// TokenReviewer authenticates bearer tokens with the API server's
// TokenReview: an expired or unknown token is refused.
type TokenReviewer struct {
	Client kubernetes.Interface
	// Audiences, when set, are the audiences the token must be for.
	Audiences []string
	cache     *ttlCache[*User]
	once      sync.Once
}

// Authenticate reviews the token (answers are kept for reviewTTL, by the
// token's hash).
func (t *TokenReviewer) Authenticate(ctx context.Context, token string) (*User, error) {
	t.once.Do(func() { t.cache = newTTLCache[*User](reviewTTL) })
	if token == "" {
		return nil, ErrUnauthenticated
	}
	sum := sha256.Sum256([]byte(token))
	k := string(sum[:])
	now := time.Now()
	if u, ok := t.cache.get(k, now); ok {
		if u == nil {
			return nil, ErrUnauthenticated
		}
		return u, nil
	}
	tr, err := t.Client.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{
		Spec: authnv1.TokenReviewSpec{Token: token, Audiences: t.Audiences},
	}, metav1.CreateOptions{})
	if err != nil {
		return nil, fmt.Errorf("reviewing the token: %w", err)
	}
	if !tr.Status.Authenticated {
		t.cache.put(k, nil, now)
		return nil, ErrUnauthenticated
	}
	u := &User{Name: tr.Status.User.Username, UID: tr.Status.User.UID, Groups: tr.Status.User.Groups}
	if len(tr.Status.User.Extra) > 0 {
		u.Extra = map[string]authzv1.ExtraValue{}
		for k, v := range tr.Status.User.Extra {
			u.Extra[k] = authzv1.ExtraValue(v)
		}
	}
	t.cache.put(k, u, now)
	return u, nil
}

// AccessReviewer authorizes with SubjectAccessReviews: may the user list
// this kind in this namespace, as kubectl get would need.
type AccessReviewer struct {
	Client kubernetes.Interface
	cache  *ttlCache[bool]
	once   sync.Once
}

// CanList asks the API server (answers are kept for reviewTTL).
func (a *AccessReviewer) CanList(ctx context.Context, u *User, resource, namespace string) (bool, error) {
	a.once.Do(func() { a.cache = newTTLCache[bool](reviewTTL) })
	if u == nil {
		return false, nil
	}
	k := fmt.Sprintf("%s\x00%s\x00%v\x00%v\x00%s\x00%s", u.Name, u.UID, u.Groups, u.Extra, resource, namespace)
	now := time.Now()
	if ok, hit := a.cache.get(k, now); hit {
		return ok, nil
	}
	group, res := groupOf(resource)
	sar, err := a.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{
		Spec: authzv1.SubjectAccessReviewSpec{
			User: u.Name, UID: u.UID, Groups: u.Groups, Extra: u.Extra,
			ResourceAttributes: &authzv1.ResourceAttributes{
				Verb: "list", Group: group, Resource: res, Namespace: namespace,
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		return false, fmt.Errorf("reviewing %s's access to %s in %q: %w", u.Name, resource, namespace, err)
	}
	a.cache.put(k, sar.Status.Allowed, now)
	return sar.Status.Allowed, nil
}

// groupOf splits a resource name of Authorizer into its API group and
// resource: fleet's group unless it says "resource.group".
func groupOf(resource string) (string, string) {
	if r, g, ok := strings.Cut(resource, "."); ok {
		return g, r
	}
	return fleet.GroupVersion.Group, resource
}
