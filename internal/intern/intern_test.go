package intern

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
	"unsafe"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/json"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// same tells whether a and b share their bytes.
func same(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

// fresh is a copy of s with bytes of its own, as a decoder makes it.
func fresh(s string) string { return strings.Clone(s) }

func TestPoolSharesEqualStrings(t *testing.T) {
	g := NewWithT(t)
	p := NewPool()
	a := p.String(fresh("fleet.cattle.io/bundle-name"))
	b := p.String(fresh("fleet.cattle.io/bundle-name"))
	g.Expect(b).To(Equal("fleet.cattle.io/bundle-name"))
	g.Expect(same(a, b)).To(BeTrue(), "the second copy is the first")
	g.Expect(p.String("")).To(Equal(""))

	m := p.Map(map[string]string{fresh("fleet.cattle.io/bundle-name"): fresh("app")})
	g.Expect(m).To(Equal(map[string]string{"fleet.cattle.io/bundle-name": "app"}))
	for k := range m {
		g.Expect(same(k, a)).To(BeTrue())
	}
}

// Strings no object asks for any more leave the pool after two
// generations; those asked for stay; the pool is bounded whatever is
// written, and long strings are never held.
func TestPoolForgetsUnusedStrings(t *testing.T) {
	g := NewWithT(t)
	p := NewPool()
	clock := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	p.now, p.started = func() time.Time { return clock }, clock
	kept := p.String(fresh("kept"))
	for i := range 10 * minGeneration {
		p.String(fmt.Sprintf("commit-%d", i))
		g.Expect(same(p.String(fresh("kept")), kept)).To(BeTrue(), "a string in use keeps its copy")
		if i%minGeneration == 0 {
			clock = clock.Add(generationAge)
		}
	}
	g.Expect(p.Len()).To(BeNumerically("<=", 4*minGeneration), "old commits are gone")

	// Without time passing, the bound by count.
	for i := range 3 * maxGeneration {
		p.String(fmt.Sprintf("flood-%d", i))
	}
	g.Expect(p.Len()).To(BeNumerically("<=", 2*maxGeneration))

	long := strings.Repeat("x", maxLen+1)
	g.Expect(same(p.String(long), long)).To(BeTrue())
	g.Expect(same(p.String(fresh(long)), long)).To(BeFalse(), "a long string is not held")
}

// With more distinct strings in use than a generation's minimum, those
// looked up again stay shared: cluster namespaces at 10,000 clusters.
func TestPoolKeepsALargeWorkingSet(t *testing.T) {
	g := NewWithT(t)
	p := NewPool()
	const n = 20000
	first := make([]string, n)
	for i := range first {
		first[i] = p.String(fmt.Sprintf("cluster-ns-%05d", i))
	}
	shared := 0
	for i := range first {
		if same(p.String(fmt.Sprintf("cluster-ns-%05d", i)), first[i]) {
			shared++
		}
	}
	g.Expect(shared).To(Equal(n))
}

// A transformed BundleDeployment equals the one decoded, and two of them
// share their repeated strings.
func TestTransformKeepsValues(t *testing.T) {
	g := NewWithT(t)
	p := NewPool()
	decode := func(cluster string) *fleet.BundleDeployment {
		bd := &fleet.BundleDeployment{
			ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "cluster-ns-" + cluster,
				Labels:          map[string]string{fleet.BundleNameLabel: "app", fleet.ClusterLabel: cluster},
				Annotations:     map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "X", Name: "owner"}},
				Finalizers:      []string{"fleet.cattle.io/f"}},
			Spec: fleet.BundleDeploymentSpec{DeploymentID: "s-abc:123", StagedDeploymentID: "s-abc:123"},
			Status: fleet.BundleDeploymentStatus{AppliedDeploymentID: "s-abc:123", Release: "default/app:1",
				Conditions:     []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Ready"}},
				Display:        fleet.BundleDeploymentDisplay{State: "Ready"},
				Resources:      []fleet.BundleDeploymentResource{{Kind: "ConfigMap", APIVersion: "v1", Namespace: "default", Name: "app"}},
				NonReadyStatus: []fleet.NonReadyStatus{{Kind: "Deployment", Summary: fleet.Summary{State: "progressing"}}},
				ModifiedStatus: []fleet.ModifiedStatus{{Kind: "Service", Patch: "{}"}},
			},
		}
		raw, err := json.Marshal(bd)
		g.Expect(err).NotTo(HaveOccurred())
		out := &fleet.BundleDeployment{}
		g.Expect(json.Unmarshal(raw, out)).To(Succeed())
		return out
	}
	one, two := decode("one"), decode("two")
	want := one.DeepCopy()
	got, err := p.Transform(one)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(got).To(Equal(want))
	_, err = p.Transform(two)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(same(one.Spec.DeploymentID, two.Status.AppliedDeploymentID)).To(BeTrue())
	g.Expect(same(one.Status.Conditions[0].Reason, two.Status.Conditions[0].Type)).To(BeTrue())
	g.Expect(same(one.Labels[fleet.BundleNameLabel], two.Labels[fleet.BundleNameLabel])).To(BeTrue())

	c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c", Namespace: "fleet-default"},
		Status: fleet.ClusterStatus{Namespace: "cluster-ns", Display: fleet.ClusterDisplay{State: "Ready"}}}
	wantC := c.DeepCopy()
	gotC, err := p.Transform(c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(gotC).To(Equal(wantC))
	_, err = p.Transform("not an object")
	g.Expect(err).NotTo(HaveOccurred(), "what is no object passes through")
}

// The pool serves several informers at once.
func TestPoolConcurrent(t *testing.T) {
	p := NewPool()
	var wg sync.WaitGroup
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 3 * minGeneration {
				s := fmt.Sprintf("s-%d", (i+w)%(2*minGeneration))
				if got := p.String(s); got != s {
					t.Errorf("String(%q) = %q", s, got)
					return
				}
			}
		}()
	}
	wg.Wait()
}
