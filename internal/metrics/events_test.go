package metrics

import (
	"fmt"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

type event struct{ kind, reason, note string }

// recorder keeps the events it is given: what the Limiter lets through.
type recorder struct{ events []event }

func (r *recorder) Eventf(_, _ runtime.Object, kind, reason, _, note string, args ...interface{}) {
	r.events = append(r.events, event{kind, reason, fmt.Sprintf(note, args...)})
}

// clock is a settable time for the Limiter.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newLimiter(o LimiterOptions) (*Limiter, *clock) {
	c := &clock{t: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	l := NewLimiter(o)
	l.Now = c.now
	return l, c
}

func gitRepo(state string) *fleet.GitRepo {
	r := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "flappy", UID: "uid-flappy"}}
	r.Status.Display.State, r.Status.Display.Message = state, "the message"
	return r
}

func TestAFlappingGitRepoGetsAtMostTheBurst(t *testing.T) {
	g := NewWithT(t)
	l, clk := newLimiter(LimiterOptions{Burst: 5, Interval: time.Minute, QPS: 100})
	rec := &recorder{}
	tr := NewTracker(GitRepos, l.Recorder(rec), l.Forget)
	old := gitRepo("Ready")
	tr.OnAdd(old, true)
	g.Expect(rec.events).To(BeEmpty(), "the first sight of an object is no change")

	for i := range 20 {
		clk.t = clk.t.Add(time.Second) // 20 flaps in 20 seconds
		n := gitRepo([]string{"ErrApplied", "Ready"}[i%2])
		tr.OnUpdate(old, n)
		old = n
	}
	g.Expect(rec.events).To(HaveLen(5))
	g.Expect(rec.events[0]).To(Equal(event{"Warning", fleet.ReasonStateChanged, "GitRepo state changed from Ready to ErrApplied: the message"}))
	g.Expect(rec.events[1]).To(Equal(event{"Normal", fleet.ReasonStateChanged, "GitRepo state changed from ErrApplied to Ready: the message"}))
	// The gauge followed every flap all the same.
	g.Expect(scrape(t, "fleet_gitrepos", tr)).To(HaveKeyWithValue("ns/Ready", 1.0))

	// After the burst, one per interval.
	clk.t = clk.t.Add(time.Minute)
	for range 3 {
		n := gitRepo(map[bool]string{true: "ErrApplied", false: "Ready"}[old.Status.Display.State == "Ready"])
		tr.OnUpdate(old, n)
		old = n
	}
	g.Expect(rec.events).To(HaveLen(6))

	// A state the same as before records nothing.
	tr.OnUpdate(old, old)
	g.Expect(rec.events).To(HaveLen(6))

	// Deleted, the object is forgotten by the Limiter too.
	g.Expect(l.Tracked()).To(Equal(1))
	tr.OnDelete(old)
	g.Expect(l.Tracked()).To(Equal(0))
}

func TestTheGlobalCapBoundsAStorm(t *testing.T) {
	g := NewWithT(t)
	l, _ := newLimiter(LimiterOptions{Burst: 5, Interval: time.Minute, QPS: 2}) // a burst of 20 over all objects
	rec := &recorder{}
	tr := NewTracker(Clusters, l.Recorder(rec), l.Forget)
	for i := range 100 {
		tr.OnAdd(cluster("ns", fmt.Sprintf("c-%d", i), fmt.Sprintf("uid-%d", i), "Ready"), true)
	}
	for i := range 100 {
		tr.OnUpdate(nil, cluster("ns", fmt.Sprintf("c-%d", i), fmt.Sprintf("uid-%d", i), fleet.ClusterStateOffline))
	}
	g.Expect(rec.events).To(HaveLen(20))
	g.Expect(scrape(t, "fleet_clusters", tr)).To(HaveKeyWithValue("ns/Offline", 100.0))
}

func TestLimiterForgetsObjectsWhoseBurstIsWhole(t *testing.T) {
	g := NewWithT(t)
	l, clk := newLimiter(LimiterOptions{Burst: 2, Interval: time.Minute, QPS: 100})
	for i := range 50 {
		g.Expect(l.Allow(types.UID(fmt.Sprint(i)))).To(BeTrue())
	}
	g.Expect(l.Tracked()).To(Equal(50))
	clk.t = clk.t.Add(2 * time.Minute)
	g.Expect(l.Allow("new")).To(BeTrue())
	g.Expect(l.Tracked()).To(Equal(1), "only the object that just had an event is held")
}

func TestNoDoubleEventForABundleControllerFailure(t *testing.T) {
	g := NewWithT(t)
	l, _ := newLimiter(LimiterOptions{})
	rec := &recorder{}
	tr := NewTracker(Bundles, l.Recorder(rec), l.Forget)
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "b", UID: "u"}}
	b.Status.Summary = fleet.BundleSummary{Ready: 1, DesiredReady: 1}
	b.Status.Display.State = "Ready"
	tr.OnAdd(b, true)
	// The bundle controller failed: it shows ErrApplied without its
	// deployments saying so, and internal/outcome records that itself.
	failed := b.DeepCopy()
	failed.Status.Display.State = "ErrApplied"
	tr.OnUpdate(b, failed)
	tr.OnUpdate(failed, b)
	g.Expect(rec.events).To(BeEmpty())
	g.Expect(scrape(t, "fleet_bundles", tr)).To(HaveKeyWithValue("ns/Ready", 1.0))
	// A deployment failing is news.
	bad := b.DeepCopy()
	bad.Status.Summary = fleet.BundleSummary{ErrApplied: 1, DesiredReady: 1}
	bad.Status.Display.State = "ErrApplied"
	tr.OnUpdate(b, bad)
	g.Expect(rec.events).To(HaveLen(1))
	g.Expect(rec.events[0].kind).To(Equal("Warning"))
}

func TestARecreatedObjectStartsOver(t *testing.T) {
	g := NewWithT(t)
	l, _ := newLimiter(LimiterOptions{})
	rec := &recorder{}
	tr := NewTracker(GitRepos, l.Recorder(rec), l.Forget)
	tr.OnAdd(gitRepo("Ready"), true)
	// Deleted and made again while the watch was down: the relist shows
	// the new object (another UID) as an update of the old one.
	again := gitRepo("ErrApplied")
	again.UID = "uid-again"
	tr.OnUpdate(gitRepo("Ready"), again)
	g.Expect(rec.events).To(BeEmpty(), "a new object's first state is no change")
	g.Expect(scrape(t, "fleet_gitrepos", tr)).To(And(HaveKeyWithValue("ns/ErrApplied", 1.0), HaveKeyWithValue("ns/Ready", 0.0)))
	back := gitRepo("Ready")
	back.UID = "uid-again"
	tr.OnUpdate(again, back)
	g.Expect(rec.events).To(HaveLen(1))
	g.Expect(rec.events[0].note).To(HavePrefix("GitRepo state changed from ErrApplied to Ready"))
}

func TestTheStepsOfARolloutAreNoEvents(t *testing.T) {
	g := NewWithT(t)
	l, _ := newLimiter(LimiterOptions{})
	rec := &recorder{}
	tr := NewTracker(Clusters, l.Recorder(rec), l.Forget)
	steps := []string{fleet.ClusterStateWaitCheckIn, "WaitApplied", "Ready", "OutOfSync", "WaitApplied", "Ready", "NotReady", "Ready"}
	old := cluster("ns", "c", "u", steps[0])
	tr.OnAdd(old, true)
	for _, st := range steps[1:] {
		n := cluster("ns", "c", "u", st)
		tr.OnUpdate(old, n)
		old = n
	}
	g.Expect(rec.events).To(Equal([]event{
		{"Warning", fleet.ReasonStateChanged, "Cluster state changed from Ready to NotReady"},
		{"Normal", fleet.ReasonStateChanged, "Cluster state changed from NotReady to Ready"},
	}))
}
