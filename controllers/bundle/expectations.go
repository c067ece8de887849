package bundle

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// expectationTTL bounds how long a created BundleDeployment is assumed to
// exist without the cache showing it.
const expectationTTL = 30 * time.Second

// expectations remember the BundleDeployments a pass created until the cache
// shows them. The next pass (maxNew requeues it at once) usually runs before
// the watch delivers them, and would otherwise create them all again only to
// be told they exist: at 1000 clusters that was 3 creates in 4 wasted.
type expectations struct {
	mu       sync.Mutex
	byBundle map[types.UID]map[string]expected // bundle -> cluster namespace
}

type expected struct {
	bd *fleet.BundleDeployment
	at time.Time
}

// created records a BundleDeployment a pass of bundle created.
func (e *expectations) created(bundle types.UID, bd *fleet.BundleDeployment, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.byBundle == nil {
		e.byBundle = map[types.UID]map[string]expected{}
	}
	m := e.byBundle[bundle]
	if m == nil {
		m = map[string]expected{}
		e.byBundle[bundle] = m
	}
	m[bd.Namespace] = expected{bd: bd, at: now}
}

// fill adds to existing (by cluster namespace, read from the cache) the
// BundleDeployments created but not in the cache yet, and forgets those the
// cache shows or that are older than expectationTTL.
func (e *expectations) fill(bundle types.UID, existing map[string]*fleet.BundleDeployment, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := e.byBundle[bundle]
	for ns, exp := range m {
		switch {
		case existing[ns] != nil || now.Sub(exp.at) > expectationTTL:
			delete(m, ns)
		default:
			existing[ns] = exp.bd
		}
	}
	if len(m) == 0 {
		delete(e.byBundle, bundle)
	}
}

// addTo adds to existing every BundleDeployment of bundle created and not yet
// seen, without forgetting any: for the next batch of the same pass.
func (e *expectations) addTo(bundle types.UID, existing map[string]*fleet.BundleDeployment) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for ns, exp := range e.byBundle[bundle] {
		if existing[ns] == nil {
			existing[ns] = exp.bd
		}
	}
}

// forget drops what is remembered of a bundle.
func (e *expectations) forget(bundle types.UID) {
	e.mu.Lock()
	defer e.mu.Unlock()
	delete(e.byBundle, bundle)
}
