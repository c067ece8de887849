package gitrepo

import (
	"testing"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The GitRepos waiting for a slot are woken one per slot given back, in
// the order they came, once each, and not once they found a slot by their
// own retry.
func TestSlotWaiters(t *testing.T) {
	g := NewWithT(t)
	var w slotWaiters
	a, b, c := client.ObjectKey{Namespace: "red", Name: "a"}, client.ObjectKey{Namespace: "red", Name: "b"}, client.ObjectKey{Namespace: "red", Name: "c"}
	blue := client.ObjectKey{Namespace: "blue", Name: "a"}
	_, ok := w.next("red")
	g.Expect(ok).To(BeFalse())
	for _, k := range []client.ObjectKey{a, b, blue, a, c} {
		w.wait(k)
	}
	w.taken(b)
	next, ok := w.next("red")
	g.Expect(ok).To(BeTrue())
	g.Expect(next).To(Equal(a))
	next, ok = w.next("red")
	g.Expect(ok).To(BeTrue())
	g.Expect(next).To(Equal(c), "b found a slot itself")
	_, ok = w.next("red")
	g.Expect(ok).To(BeFalse())
	next, ok = w.next("blue")
	g.Expect(ok).To(BeTrue())
	g.Expect(next).To(Equal(blue))
	g.Expect(w.waiting).To(BeEmpty())
	g.Expect(w.queued).To(BeEmpty())
}
