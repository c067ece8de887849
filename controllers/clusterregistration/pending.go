package clusterregistration

import (
	"sync"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/cacheindex"
)

// pendingBound bounds the grants whose credential waits for its agent:
// those whose token read RoleBinding (named after the credential secret, in
// the system registration namespace, carrying registrationLabel) is still
// there. A grant counts from its admission until withdrawn says that binding
// is gone.
//
// It bounds them overall (max) and per registration token (maxPerToken):
// one token holder must not be able to fill the bound alone and hold every
// other registration back until its grants expire. A binding's token is
// read from its labels (fleet.RegistrationTokenLabel, in the namespace of
// registrationNamespaceLabel).
//
// The cache alone cannot count them: a binding reaches it some time after it
// is made, and workers that admit grants meanwhile would all pass the bound.
// So the count is the union, by binding name, of the pending bindings the
// cache holds and the grants admitted whose binding the cache does not show
// yet. An admitted key leaves that set once the cache shows a binding made
// after the admission (it is then counted through the cache), or when its
// binding is withdrawn. The count can only be too high, briefly (a binding
// deleted but still in the cache), never too low.
type pendingBound struct {
	max         int
	maxPerToken int
	namespace   string
	bindings    toolscache.Indexer // the cache's RoleBindings

	mu sync.Mutex
	// admitted holds the keys admitted and not yet withdrawn whose binding
	// the cache may not show, with the UID of the binding the cache held for
	// it at admission ("" for none): another UID in the cache is a binding
	// made since.
	admitted map[string]admission
	// granting counts, per key, the reconciles between admit and done: a
	// withdrawal meanwhile (the agent fetched an earlier credential of the
	// same request) must not uncount the binding that grant is making.
	granting map[string]int
}

// admission is an admitted key: the UID of the binding the cache held for
// it at admission, and the token of the grant.
type admission struct {
	uid   types.UID
	token string
}

func newPendingBound(max, maxPerToken int, namespace string, bindings toolscache.Indexer) *pendingBound {
	return &pendingBound{max: max, maxPerToken: maxPerToken, namespace: namespace, bindings: bindings,
		admitted: map[string]admission{}, granting: map[string]int{}}
}

// admit tells whether the grant of key (its credential secret's name),
// made with token ("namespace/name"), may go on now; when it may not,
// perToken tells whether the token's own bound holds it back. A key admitted
// before, or whose binding the cache holds (a retried grant), is not counted
// again. Each admit that returns true must be followed by done(key) once the
// grant has run.
func (p *pendingBound) admit(key, token string) (ok, perToken bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	cached, err := cacheindex.Objects[rbacv1.RoleBinding](p.bindings, toolscache.NamespaceIndex, p.namespace)
	if err != nil {
		return false, false, err
	}
	n, ofToken := 0, 0
	for _, b := range cached {
		if isPendingBinding(b) {
			n++
			if bindingToken(b) == token {
				ofToken++
			}
		}
	}
	for k, at := range p.admitted {
		uid, inCache := p.cachedUID(k)
		switch {
		case !inCache:
			n++
			if at.token == token {
				ofToken++
			}
		case uid != at.uid && p.granting[k] == 0:
			delete(p.admitted, k) // made since the admission: counted through the cache
		}
	}
	_, again := p.admitted[key]
	uid, inCache := p.cachedUID(key)
	switch {
	case again:
	case inCache:
		p.admitted[key] = admission{uid: uid, token: token}
	case n >= p.max:
		return false, false, nil
	case p.maxPerToken > 0 && ofToken >= p.maxPerToken:
		return false, true, nil
	default:
		p.admitted[key] = admission{token: token}
	}
	p.granting[key]++
	return true, false, nil
}

// done ends the grant of key that admit let through.
func (p *pendingBound) done(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.granting[key]--; p.granting[key] <= 0 {
		delete(p.granting, key)
	}
}

// withdrawn uncounts key: its binding has been deleted.
func (p *pendingBound) withdrawn(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.granting[key] == 0 {
		delete(p.admitted, key)
	}
}

// cachedUID is the UID of the pending binding named key in the cache.
func (p *pendingBound) cachedUID(key string) (types.UID, bool) {
	obj, ok, err := p.bindings.GetByKey(p.namespace + "/" + key)
	if err != nil || !ok {
		return "", false
	}
	b, ok := obj.(*rbacv1.RoleBinding)
	if !ok || !isPendingBinding(b) {
		return "", false
	}
	return b.UID, true
}

// bindingToken is the token ("namespace/name") a pending binding lets read
// a credential.
func bindingToken(b *rbacv1.RoleBinding) string {
	return b.Labels[registrationNamespaceLabel] + "/" + b.Labels[fleet.RegistrationTokenLabel]
}

func isPendingBinding(b *rbacv1.RoleBinding) bool {
	return b.Labels[registrationLabel] != ""
}
