package clusterregistration

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func newIndexer() toolscache.Indexer {
	return toolscache.NewIndexer(toolscache.MetaNamespaceKeyFunc, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
}

func pendingBinding(ns, name, uid string) *rbacv1.RoleBinding {
	return &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID(uid),
		Labels: map[string]string{registrationLabel: "r"}}}
}

func TestPendingBound(t *testing.T) {
	g := NewWithT(t)
	idx := newIndexer()
	for i := range 2 {
		g.Expect(idx.Add(pendingBinding("system", fmt.Sprint("pending-", i), fmt.Sprint("uid-", i)))).To(Succeed())
	}
	g.Expect(idx.Add(&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "system", Name: "unrelated"}})).To(Succeed())
	g.Expect(idx.Add(pendingBinding("elsewhere", "other", "uid-x"))).To(Succeed())

	p := newPendingBound(3, 0, "system", idx)
	admit := func(key string) bool {
		ok, _, err := p.admit(key, "t")
		g.Expect(err).NotTo(HaveOccurred())
		if ok {
			p.done(key)
		}
		return ok
	}
	g.Expect(admit("a")).To(BeTrue(), "2 of 3 pending: only token read bindings in the system namespace count")
	g.Expect(admit("b")).To(BeFalse(), "the grant just let through counts before the cache shows it")
	g.Expect(admit("a")).To(BeTrue(), "a retried grant is not counted twice")
	g.Expect(admit("pending-0")).To(BeTrue(), "a retried grant whose binding the cache holds is not counted twice")

	g.Expect(idx.Add(pendingBinding("system", "a", "uid-a"))).To(Succeed())
	g.Expect(admit("b")).To(BeFalse(), "a grant the cache shows counts once")
	g.Expect(p.admitted).NotTo(HaveKey("a"), "counted through the cache from then on")

	g.Expect(idx.Delete(pendingBinding("system", "pending-1", ""))).To(Succeed())
	p.withdrawn("pending-1")
	g.Expect(admit("b")).To(BeTrue(), "a pickup frees a place")
	g.Expect(admit("c")).To(BeFalse())

	p.withdrawn("b")
	g.Expect(admit("c")).To(BeTrue(), "a withdrawal frees a place even before the cache saw the binding")
}

func TestPendingBoundKeepsCountingARegrantWhileItsOldBindingGoes(t *testing.T) {
	g := NewWithT(t)
	idx := newIndexer()
	g.Expect(idx.Add(pendingBinding("system", "a", "old"))).To(Succeed())
	p := newPendingBound(2, 0, "system", idx)

	// The grant of "a" is retried while the agent fetches the credential of
	// the first try: the pickup withdraws the old binding meanwhile.
	ok, _, err := p.admit("a", "t")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	g.Expect(idx.Delete(pendingBinding("system", "a", ""))).To(Succeed())
	p.withdrawn("a")
	p.done("a") // the retry made a new binding, not in the cache yet

	ok, _, err = p.admit("b", "t")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue())
	p.done("b")
	ok, _, err = p.admit("c", "t")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse(), "the new binding of a still counts")

	g.Expect(idx.Add(pendingBinding("system", "a", "new"))).To(Succeed())
	ok, _, err = p.admit("c", "t")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeFalse(), "and counts once the cache shows it")
	g.Expect(p.admitted).NotTo(HaveKey("a"))
}

// TestPendingBoundUnderConcurrency admits many grants from many workers at
// once against a cache that lags behind the API server, with agents
// picking up their credentials meanwhile, and checks that the pending
// bindings the API server holds never exceed the bound.
func TestPendingBoundUnderConcurrency(t *testing.T) {
	const (
		maxPending = 10
		grants     = 400
		workers    = 32
	)
	g := NewWithT(t)
	idx := newIndexer()
	p := newPendingBound(maxPending, 0, "system", idx)

	// The API server: the bindings that exist, and the most at once.
	var (
		mu        sync.Mutex
		existing  = map[string]bool{}
		peak      int
		uidSerial int
	)
	// The cache applies the API server's changes in order, late.
	type change struct {
		b   *rbacv1.RoleBinding
		del bool
	}
	changes := make(chan change, grants*2)
	cacheDone := make(chan struct{})
	go func() {
		defer close(cacheDone)
		for c := range changes {
			if rand.IntN(4) == 0 {
				time.Sleep(time.Duration(rand.IntN(300)) * time.Microsecond) // informer latency
			}
			if c.del {
				_ = idx.Delete(c.b)
			} else {
				_ = idx.Add(c.b)
			}
		}
	}()
	create := func(key string) {
		mu.Lock()
		defer mu.Unlock()
		if existing[key] {
			return
		}
		existing[key] = true
		peak = max(peak, len(existing))
		uidSerial++
		changes <- change{b: pendingBinding("system", key, fmt.Sprint(uidSerial))}
	}
	remove := func(key string) {
		mu.Lock()
		defer mu.Unlock()
		delete(existing, key)
		changes <- change{b: pendingBinding("system", key, ""), del: true}
	}

	keys := make(chan string, grants)
	for i := range grants {
		keys <- fmt.Sprint("cred-", i)
	}
	close(keys)
	pickups := make(chan string, grants)
	var pickupWG sync.WaitGroup
	for range 8 {
		pickupWG.Add(1)
		go func() {
			defer pickupWG.Done()
			for key := range pickups {
				runtime.Gosched()
				remove(key)
				p.withdrawn(key)
			}
		}()
	}
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for key := range keys {
				for {
					ok, _, err := p.admit(key, "t")
					if err != nil {
						t.Error(err)
						return
					}
					if ok {
						break
					}
					runtime.Gosched()
				}
				create(key)
				// A retry of the same grant, as after a failed status
				// write, must not take a second place.
				if rand.IntN(3) == 0 {
					if ok, _, _ := p.admit(key, "t"); ok {
						p.done(key)
					}
				}
				p.done(key)
				pickups <- key
			}
		}()
	}
	wg.Wait()
	close(pickups)
	pickupWG.Wait()
	close(changes)
	<-cacheDone

	g.Expect(peak).To(And(BeNumerically(">", 0), BeNumerically("<=", maxPending)), "pending bindings the API server held at once")
	g.Expect(existing).To(BeEmpty())
	g.Expect(p.admitted).To(BeEmpty(), "every grant withdrawn is uncounted")
	g.Expect(p.granting).To(BeEmpty())
}

func TestPendingBoundPerToken(t *testing.T) {
	g := NewWithT(t)
	idx := newIndexer()
	flood := func(name string) *rbacv1.RoleBinding {
		b := pendingBinding("system", name, "uid-"+name)
		b.Labels[registrationNamespaceLabel] = "ws"
		b.Labels[fleet.RegistrationTokenLabel] = "a"
		return b
	}
	g.Expect(idx.Add(flood("a-0"))).To(Succeed())
	p := newPendingBound(10, 2, "system", idx)
	ok, perToken, err := p.admit("a-1", "ws/a")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ok).To(BeTrue(), "1 of 2 of token a")
	p.done("a-1")
	ok, perToken, _ = p.admit("a-2", "ws/a")
	g.Expect(ok).To(BeFalse(), "token a has 2 waiting, one of them not in the cache yet")
	g.Expect(perToken).To(BeTrue(), "held back by the token's own bound")
	ok, _, _ = p.admit("b-1", "ws/b")
	g.Expect(ok).To(BeTrue(), "another token is not held back by a's grants")
	p.done("b-1")
	ok, _, _ = p.admit("a-3", "other/a")
	g.Expect(ok).To(BeTrue(), "a token of the same name in another namespace is another token")
}
