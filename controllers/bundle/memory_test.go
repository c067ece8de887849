package bundle

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/target"
)

func TestMemoryCompiledBundles(t *testing.T) {
	g := NewWithT(t)
	var m memory
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app", UID: "u1", Generation: 1}}
	_, ok := m.compiledBundle(b)
	g.Expect(ok).To(BeFalse(), "nothing compiled yet")

	c, err := target.Compile(b)
	g.Expect(err).NotTo(HaveOccurred())
	m.storeCompiled(b, c)
	got, ok := m.compiledBundle(b)
	g.Expect(ok).To(BeTrue())
	g.Expect(got).To(BeIdenticalTo(c))

	next := b.DeepCopy()
	next.Generation = 2
	_, ok = m.compiledBundle(next)
	g.Expect(ok).To(BeFalse(), "a new generation compiles again")
	recreated := b.DeepCopy()
	recreated.UID = "u2"
	_, ok = m.compiledBundle(recreated)
	g.Expect(ok).To(BeFalse(), "a bundle re-created under the same name is another bundle")

	m.forget(b.UID)
	_, ok = m.compiledBundle(b)
	g.Expect(ok).To(BeFalse(), "forgotten with its deletion")
}

func TestMemoryCompiledGroups(t *testing.T) {
	g := NewWithT(t)
	var m memory
	group := &fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "edge", Namespace: "fleet-default", UID: "g1", ResourceVersion: "1"}}
	c, err := target.CompileGroup(group)
	g.Expect(err).NotTo(HaveOccurred())
	m.storeGroup(group, c)
	_, ok := m.compiledGroup(group)
	g.Expect(ok).To(BeTrue())

	relabelled := group.DeepCopy()
	relabelled.ResourceVersion = "2"
	_, ok = m.compiledGroup(relabelled)
	g.Expect(ok).To(BeFalse(), "any change of the group (labels too) compiles again")

	m.forgetGroup(group.UID)
	_, ok = m.compiledGroup(group)
	g.Expect(ok).To(BeFalse(), "forgotten when the group is deleted")
}

func TestMemoryPassesAndRetarget(t *testing.T) {
	g := NewWithT(t)
	var m memory
	key := types.NamespacedName{Namespace: "fleet-default", Name: "app"}
	g.Expect(m.takeRetarget(key)).To(BeFalse())
	m.markRetarget(key)
	m.markRetarget(key)
	g.Expect(m.takeRetarget(key)).To(BeTrue(), "a mark asks for one full pass")
	g.Expect(m.takeRetarget(key)).To(BeFalse(), "taking the mark clears it")
	m.markRetarget(key)
	m.forgetKey(key)
	g.Expect(m.takeRetarget(key)).To(BeFalse(), "dropped when the bundle is gone")

	p := &pass{generation: 1, contentName: "s-abc"}
	m.rememberPass("u1", p)
	got, ok := m.lastPass("u1")
	g.Expect(ok).To(BeTrue())
	g.Expect(got).To(BeIdenticalTo(p))
	m.forgetPass("u1")
	_, ok = m.lastPass("u1")
	g.Expect(ok).To(BeFalse(), "a failed full pass forgets the last one")
	m.rememberPass("u1", p)
	m.forget("u1")
	_, ok = m.lastPass("u1")
	g.Expect(ok).To(BeFalse(), "forgotten with the bundle's deletion")
}

func TestMemoryExpectations(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1000, 0)
	bd := func(ns string) *fleet.BundleDeployment {
		return &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}}
	}
	var m memory
	m.created("bundle", bd("c1"), now)
	m.created("bundle", bd("c2"), now)
	m.created("other", bd("c1"), now)

	cached := bd("c1")
	existing := map[string]*fleet.BundleDeployment{"c1": cached}
	m.fill("bundle", existing, now.Add(time.Second))
	g.Expect(existing).To(HaveLen(2), "c2 is not in the cache yet but exists")
	g.Expect(existing["c1"]).To(BeIdenticalTo(cached), "what the cache shows wins")

	existing = map[string]*fleet.BundleDeployment{}
	m.fill("bundle", existing, now.Add(2*time.Second))
	g.Expect(existing).To(HaveKey("c2"))
	g.Expect(existing).NotTo(HaveKey("c1"), "seen in the cache once: no longer expected")

	existing = map[string]*fleet.BundleDeployment{}
	m.fill("bundle", existing, now.Add(expectationTTL+time.Second))
	g.Expect(existing).To(BeEmpty(), "expectations expire")

	m.created("bundle", bd("c3"), now)
	existing = map[string]*fleet.BundleDeployment{"c3": bd("c3")}
	m.addTo("bundle", existing)
	m.addTo("bundle", existing)
	existing = map[string]*fleet.BundleDeployment{}
	m.addTo("bundle", existing)
	g.Expect(existing).To(HaveKey("c3"), "addTo forgets nothing")

	m.created("bundle", bd("c4"), now)
	m.deleted(types.NamespacedName{Namespace: "c4", Name: "other-name"})
	existing = map[string]*fleet.BundleDeployment{}
	m.fill("bundle", existing, now)
	g.Expect(existing).To(HaveKey("c4"), "another deployment's deletion in the namespace changes nothing")
	m.deleted(client.ObjectKeyFromObject(bd("c4")))
	existing = map[string]*fleet.BundleDeployment{}
	m.fill("bundle", existing, now)
	g.Expect(existing).NotTo(HaveKey("c4"), "deleted before the cache showed it: no longer expected")

	m.forget("other")
	existing = map[string]*fleet.BundleDeployment{}
	m.fill("other", existing, now)
	g.Expect(existing).To(BeEmpty())
	g.Expect(m.expected).NotTo(HaveKey(types.UID("other")))
}

func TestMemoryPatchedVersionsOverTheCache(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1000, 0)
	version := func(rv, id string) *fleet.BundleDeployment {
		return &fleet.BundleDeployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: "c1", Name: "b", UID: "bd1", ResourceVersion: rv,
				ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "fleet-manager"}}},
			Spec: fleet.BundleDeploymentSpec{DeploymentID: id},
		}
	}
	var m memory
	written := version("20", "new")
	m.patched("bundle", written, now)
	g.Expect(written.ManagedFields).To(BeNil(), "kept without its managed fields")

	existing := map[string]*fleet.BundleDeployment{"c1": version("9", "old")}
	m.fill("bundle", existing, now.Add(time.Second))
	g.Expect(existing["c1"]).To(BeIdenticalTo(written), "the cache's older version is not what the API server holds")

	caught := version("20", "new")
	existing = map[string]*fleet.BundleDeployment{"c1": caught}
	m.fill("bundle", existing, now.Add(time.Second))
	g.Expect(existing["c1"]).To(BeIdenticalTo(caught), "the cache shows the version written")
	existing = map[string]*fleet.BundleDeployment{"c1": version("9", "old")}
	m.fill("bundle", existing, now.Add(time.Second))
	g.Expect(existing["c1"].Spec.DeploymentID).To(Equal("old"), "once the cache showed it, the record is gone")

	m.patched("bundle", version("30", "new"), now)
	later := version("31", "someone else's")
	existing = map[string]*fleet.BundleDeployment{"c1": later}
	m.fill("bundle", existing, now.Add(time.Second))
	g.Expect(existing["c1"]).To(BeIdenticalTo(later), "a later version, someone else's change, wins")

	m.patched("bundle", version("40", "new"), now)
	recreated := version("5", "new")
	recreated.UID = "bd2"
	existing = map[string]*fleet.BundleDeployment{"c1": recreated}
	m.fill("bundle", existing, now.Add(time.Second))
	g.Expect(existing["c1"]).To(BeIdenticalTo(recreated), "another object under the name is not older")

	m.patched("bundle", version("50", "new"), now)
	existing = map[string]*fleet.BundleDeployment{"c1": version("9", "old")}
	m.fill("bundle", existing, now.Add(expectationTTL+time.Second))
	g.Expect(existing["c1"].Spec.DeploymentID).To(Equal("old"), "records expire")

	m.patched("bundle", version("60", "new"), now)
	m.deleted(types.NamespacedName{Namespace: "c1", Name: "b"})
	existing = map[string]*fleet.BundleDeployment{}
	m.fill("bundle", existing, now)
	g.Expect(existing).To(BeEmpty(), "deleted since it was written")
	g.Expect(m.ownWrite(version("60", "new"))).To(BeFalse(), "nor is its version an own write any more")
}

func TestMemoryOwnWrites(t *testing.T) {
	g := NewWithT(t)
	bd := func(rv string) *fleet.BundleDeployment {
		return &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "c1", Name: "b", UID: "bd1", ResourceVersion: rv}}
	}
	var m memory
	g.Expect(m.ownWrite(bd("10"))).To(BeFalse(), "nothing written")
	m.patched("bundle", bd("20"), time.Unix(1000, 0))
	g.Expect(m.ownWrite(bd("15"))).To(BeFalse(), "an older version is someone else's")
	g.Expect(m.ownWrite(bd("20"))).To(BeTrue(), "the version written")
	g.Expect(m.ownWrite(bd("20"))).To(BeFalse(), "told once")

	m.patched("bundle", bd("30"), time.Unix(1000, 0))
	g.Expect(m.ownWrite(bd("31"))).To(BeFalse(), "a later version is someone else's")
	g.Expect(m.ownWrite(bd("30"))).To(BeFalse(), "and ends the record")
}
