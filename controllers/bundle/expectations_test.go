package bundle

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func TestExpectations(t *testing.T) {
	g := NewWithT(t)
	now := time.Unix(1000, 0)
	bd := func(ns string) *fleet.BundleDeployment {
		return &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "b"}}
	}
	var e expectations
	e.created("bundle", bd("c1"), now)
	e.created("bundle", bd("c2"), now)
	e.created("other", bd("c1"), now)

	cached := bd("c1")
	existing := map[string]*fleet.BundleDeployment{"c1": cached}
	e.fill("bundle", existing, now.Add(time.Second))
	g.Expect(existing).To(HaveLen(2), "c2 is not in the cache yet but exists")
	g.Expect(existing["c1"]).To(BeIdenticalTo(cached), "what the cache shows wins")

	existing = map[string]*fleet.BundleDeployment{}
	e.fill("bundle", existing, now.Add(2*time.Second))
	g.Expect(existing).To(HaveKey("c2"))
	g.Expect(existing).NotTo(HaveKey("c1"), "seen in the cache once: no longer expected")

	existing = map[string]*fleet.BundleDeployment{}
	e.fill("bundle", existing, now.Add(expectationTTL+time.Second))
	g.Expect(existing).To(BeEmpty(), "expectations expire")

	e.created("bundle", bd("c3"), now)
	existing = map[string]*fleet.BundleDeployment{"c3": bd("c3")}
	e.addTo("bundle", existing)
	e.addTo("bundle", existing)
	existing = map[string]*fleet.BundleDeployment{}
	e.addTo("bundle", existing)
	g.Expect(existing).To(HaveKey("c3"), "addTo forgets nothing")

	e.forget("other")
	existing = map[string]*fleet.BundleDeployment{}
	e.fill("other", existing, now)
	g.Expect(existing).To(BeEmpty())
	g.Expect(e.byBundle).NotTo(HaveKey(types.UID("other")))
}
