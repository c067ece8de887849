package bundle

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/target"
)

// expectationTTL bounds how long a BundleDeployment a pass wrote is trusted
// over the cache: assumed to exist without the cache showing it, or taken
// for the cache's older version. The cache shows it once the watch
// delivers its creation, which under a saturated API server took up to 47 s
// at 1000 clusters x 10 bundles: with 30 s, a third of the creates were
// sent again and refused as already there. A deployment deleted before the
// cache saw it is made again at once: its deletion's event drops the
// expectation (deleted).
const expectationTTL = 5 * time.Minute

// memory is everything the bundle controller keeps between reconciles, in
// one place so that what it remembers, who writes it and when it is dropped
// can be read (and tested) together. None of it is needed for correctness
// after a restart: each entry only saves work the controller would otherwise
// redo, or a write it would otherwise repeat.
//
// What it remembers, and who writes it:
//   - compiled target selectors of each Bundle (by UID), valid for one
//     generation: written by the compile phase of Reconcile, read by
//     Reconcile and by the Cluster mapper;
//   - compiled ClusterGroups (by UID), valid for one resourceVersion:
//     written while Reconcile matches clusters, read there and by the
//     Cluster mapper (which never writes);
//   - the targets of each Bundle's last full pass (by UID), which the
//     status passes reuse: written at the end of a successful full pass;
//   - the Bundles due for a full pass (by name): marked by the event
//     handlers of the watches whose events change targeting, taken (and so
//     dropped) by the next Reconcile of that Bundle;
//   - the BundleDeployments a pass created or patched, as the API server
//     returned them, while the cache does not show them yet, or shows an
//     older version (by Bundle UID, then cluster namespace): written by the
//     pass that wrote them, read by the next passes;
//   - the resourceVersion of each BundleDeployment a pass patched (by
//     name), until the watch delivers that version: written by the pass,
//     read by the BundleDeployment event handler, which does not take the
//     manager's own writes for someone else's.
//
// When it is dropped: a Bundle's entries when its deletion has removed its
// deployments (forget); a full pass that fails drops the last pass
// (forgetPass); a retarget mark when it is taken or the Bundle is gone; a
// ClusterGroup when its delete event comes (forgetGroup); an expectation
// when the cache shows the deployment at the version written or a later one,
// or after expectationTTL; an own write's resourceVersion when the watch
// delivers it, a later version, or the deletion. A Bundle
// deleted without its finalizer running leaves its entries behind until the
// process restarts.
//
// It is safe for concurrent use by the controller's workers and event
// handlers. Lookups are lock-free (sync.Map): every reconcile and every
// Cluster event reads it.
type memory struct {
	compiled sync.Map // types.UID -> *target.CompiledBundle
	groups   sync.Map // types.UID -> *target.CompiledGroup
	passes   sync.Map // types.UID -> *pass
	retarget sync.Map // types.NamespacedName -> struct{}
	own      sync.Map // types.NamespacedName (BundleDeployment) -> resourceVersion written

	mu       sync.Mutex
	expected map[types.UID]map[string]expected // bundle -> cluster namespace
}

type expected struct {
	bd *fleet.BundleDeployment
	at time.Time
}

// compiledBundle is b's compiled targets, if they were compiled from this
// generation of b.
func (m *memory) compiledBundle(b *fleet.Bundle) (*target.CompiledBundle, bool) {
	v, ok := m.compiled.Load(b.UID)
	if !ok {
		return nil, false
	}
	c := v.(*target.CompiledBundle)
	upToDate := c.UpToDate(b)
	return c, upToDate
}

// storeCompiled keeps b's compiled targets until its next generation.
func (m *memory) storeCompiled(b *fleet.Bundle, c *target.CompiledBundle) {
	m.compiled.Store(b.UID, c)
}

// compiledGroup is g compiled, if it was compiled from this resourceVersion
// of g (labels, which a clusterGroupSelector reads, do not bump the
// generation).
func (m *memory) compiledGroup(g *fleet.ClusterGroup) (*target.CompiledGroup, bool) {
	v, ok := m.groups.Load(g.UID)
	if !ok {
		return nil, false
	}
	c := v.(*target.CompiledGroup)
	return c, c.ResourceVersion == g.ResourceVersion
}

// storeGroup keeps g compiled until it changes.
func (m *memory) storeGroup(g *fleet.ClusterGroup, c *target.CompiledGroup) {
	m.groups.Store(g.UID, c)
}

// forgetGroup drops a deleted ClusterGroup.
func (m *memory) forgetGroup(uid types.UID) {
	m.groups.Delete(uid)
}

// lastPass is what the last successful full pass of a bundle found.
func (m *memory) lastPass(uid types.UID) (*pass, bool) {
	v, ok := m.passes.Load(uid)
	if !ok {
		return nil, false
	}
	return v.(*pass), true
}

// rememberPass keeps what a successful full pass found.
func (m *memory) rememberPass(uid types.UID, p *pass) {
	m.passes.Store(uid, p)
}

// forgetPass drops the last full pass: the next reconcile runs a full one.
func (m *memory) forgetPass(uid types.UID) {
	m.passes.Delete(uid)
}

// markRetarget records that something targeting reads changed for the
// bundle: its next reconcile runs a full pass.
func (m *memory) markRetarget(key types.NamespacedName) {
	m.retarget.Store(key, struct{}{})
}

// takeRetarget tells whether a full pass is due for the bundle, and clears
// the mark.
func (m *memory) takeRetarget(key types.NamespacedName) bool {
	_, due := m.retarget.LoadAndDelete(key)
	return due
}

// forgetKey drops what is remembered under a bundle's name: it is gone.
func (m *memory) forgetKey(key types.NamespacedName) {
	m.retarget.Delete(key)
}

// forget drops everything remembered of a bundle by UID: its deletion has
// removed its deployments.
func (m *memory) forget(uid types.UID) {
	m.compiled.Delete(uid)
	m.passes.Delete(uid)
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.expected, uid)
}

// created records a BundleDeployment a pass of bundle created. The next
// pass (maxNew requeues it at once) usually runs before the watch delivers
// it, and would otherwise create it again only to be told it exists: at
// 1000 clusters that was 3 creates in 4 wasted.
func (m *memory) created(bundle types.UID, bd *fleet.BundleDeployment, now time.Time) {
	m.expect(bundle, bd, now)
}

// patched records a BundleDeployment a pass of bundle patched, as the API
// server returned it. Until the watch delivers that version, the next
// passes (the agents' status writes and the bundle's own status bring them
// within a second) would find the cache's older spec, take it for a change
// still to make, and patch it again with the same content: at 300 clusters
// under load, 0.03 to 2 patches per BundleDeployment besides the one a
// commit needs. Nor is that version, once the watch delivers it, a change
// by someone else (see ownWrite).
func (m *memory) patched(bundle types.UID, bd *fleet.BundleDeployment, now time.Time) {
	bd.ManagedFields = nil // never read, and the larger part of the object
	m.expect(bundle, bd, now)
	if rv := bd.ResourceVersion; rv != "" {
		m.own.Store(types.NamespacedName{Namespace: bd.Namespace, Name: bd.Name}, rv)
	}
}

// ownWrite tells whether bd is the version of a BundleDeployment that a
// pass patched. That version, or any later one, ends the record.
func (m *memory) ownWrite(bd client.Object) bool {
	key := types.NamespacedName{Namespace: bd.GetNamespace(), Name: bd.GetName()}
	v, ok := m.own.Load(key)
	if !ok {
		return false
	}
	written, _ := v.(string)
	if c, err := resourceversion.CompareResourceVersion(bd.GetResourceVersion(), written); err == nil && c < 0 {
		return false // an older version: the record waits for its own
	}
	m.own.CompareAndDelete(key, v)
	return bd.GetResourceVersion() == written
}

// expect keeps bd, written by a pass of bundle, for the next passes.
func (m *memory) expect(bundle types.UID, bd *fleet.BundleDeployment, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.expected == nil {
		m.expected = map[types.UID]map[string]expected{}
	}
	e := m.expected[bundle]
	if e == nil {
		e = map[string]expected{}
		m.expected[bundle] = e
	}
	e[bd.Namespace] = expected{bd: bd, at: now}
}

// fill brings existing (by cluster namespace, read from the cache) up to
// what the bundle's passes wrote: it adds the BundleDeployments created but
// not in the cache yet, and puts those patched in place of the cache's
// older versions. It forgets those the cache shows at the version written
// or a later one (or as another object: re-created), and those older than
// expectationTTL.
func (m *memory) fill(bundle types.UID, existing map[string]*fleet.BundleDeployment, now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.expected[bundle]
	for ns, exp := range e {
		switch have := existing[ns]; {
		case now.Sub(exp.at) > expectationTTL:
			delete(e, ns)
		case have == nil || olderThan(have, exp.bd):
			existing[ns] = exp.bd
		default:
			delete(e, ns)
		}
	}
	if len(e) == 0 {
		delete(m.expected, bundle)
	}
}

// olderThan tells whether cached is an older version of the object written.
// Resource versions of one resource compare as integers
// (resourceversion.CompareResourceVersion); one that does not counts as not
// older: the cache wins.
func olderThan(cached, written *fleet.BundleDeployment) bool {
	if written.UID == "" || cached.UID != written.UID {
		return false
	}
	c, err := resourceversion.CompareResourceVersion(cached.ResourceVersion, written.ResourceVersion)
	return err == nil && c < 0
}

// deleted drops what is remembered of a BundleDeployment whose deletion the
// watch delivered: a pass must not count it as existing any more.
func (m *memory) deleted(bd types.NamespacedName) {
	m.own.Delete(bd)
	m.mu.Lock()
	defer m.mu.Unlock()
	for uid, e := range m.expected {
		if exp, ok := e[bd.Namespace]; ok && exp.bd.Name == bd.Name {
			delete(e, bd.Namespace)
			if len(e) == 0 {
				delete(m.expected, uid)
			}
		}
	}
}

// addTo adds to existing every BundleDeployment of bundle created and not yet
// seen, without forgetting any: for the next batch of the same pass.
func (m *memory) addTo(bundle types.UID, existing map[string]*fleet.BundleDeployment) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for ns, exp := range m.expected[bundle] {
		if existing[ns] == nil {
			existing[ns] = exp.bd
		}
	}
}
