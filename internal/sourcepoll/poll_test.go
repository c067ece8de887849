package sourcepoll

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/types"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

func TestPollDue(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	polled := func(mut func(*Poll)) Poll {
		p := Poll{Done: true, Generation: 2, Next: now.Add(time.Second)}
		if mut != nil {
			mut(&p)
		}
		return p
	}
	for name, tc := range map[string]struct {
		p          Poll
		generation int64
		polling    bool
		due        bool
	}{
		"never polled":                   {Poll{}, 2, true, true},
		"not yet":                        {polled(nil), 2, true, false},
		"interval over":                  {polled(func(p *Poll) { p.Next = now }), 2, true, true},
		"spec changed":                   {polled(nil), 3, true, true},
		"retry":                          {polled(func(p *Poll) { p.Retry = true }), 2, true, true},
		"not polling: the interval":      {polled(func(p *Poll) { p.Next = now }), 2, false, false},
		"not polling: a spec change":     {polled(nil), 3, false, true},
		"not polling: a retry":           {polled(func(p *Poll) { p.Retry = true }), 2, false, true},
		"not polling: never polled once": {Poll{}, 2, false, true},
	} {
		t.Run(name, func(t *testing.T) {
			NewWithT(t).Expect(tc.p.Due(now, tc.generation, tc.polling)).To(Equal(tc.due))
		})
	}
}

func TestPollStartFailHold(t *testing.T) {
	g := NewWithT(t)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	p := Poll{Retry: true}
	p.Start(now, 4, time.Minute)
	g.Expect(p).To(Equal(Poll{Done: true, Generation: 4, Next: now.Add(time.Minute)}))
	g.Expect(p.Due(now.Add(time.Second), 4, true)).To(BeFalse())

	err := errors.New("connection refused")
	g.Expect(p.Fail(err)).To(MatchError(err))
	g.Expect(p.Retry).To(BeTrue(), "a transient failure polls again with backoff")
	p.Start(now, 4, time.Minute)
	g.Expect(p.Fail(outcome.Stallf(fleet.ReasonVersionNotFound, "no such version"))).To(HaveOccurred())
	g.Expect(p.Retry).To(BeFalse(), "a stall waits for the next poll")

	p.Hold(now, time.Hour)
	g.Expect(p.Retry).To(BeTrue(), "polled at once when what held it is fixed")
	g.Expect(p.Until(now, true)).To(Equal(time.Hour), "meanwhile it comes back at its interval")
}

func TestPollUntil(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g := NewWithT(t)
	p := Poll{Next: now.Add(10 * time.Second)}
	g.Expect(p.Until(now, true)).To(Equal(10 * time.Second))
	g.Expect(p.Until(now.Add(time.Minute), true)).To(Equal(time.Millisecond), "overdue: at once")
	g.Expect(p.Until(now, false)).To(BeZero(), "without polling only a change brings it back")
}

func TestJitter(t *testing.T) {
	g := NewWithT(t)
	g.Expect(Jitter(10*time.Second, 0)).To(Equal(9 * time.Second))
	g.Expect(Jitter(10*time.Second, 0.5)).To(Equal(10 * time.Second))
	g.Expect(Jitter(10*time.Second, 0.999999)).To(BeNumerically("~", 11*time.Second, time.Millisecond))
	for range 100 {
		g.Expect(Jittered(10 * time.Second)).To(BeNumerically("~", 10*time.Second, time.Second))
	}
}

func TestStates(t *testing.T) {
	g := NewWithT(t)
	var s States[Poll]
	key := types.NamespacedName{Namespace: "ns", Name: "a"}
	s.Get(key).Done = true
	g.Expect(s.Get(key).Done).To(BeTrue(), "the same state each time")
	s.Forget(key)
	g.Expect(s.Get(key).Done).To(BeFalse(), "a forgotten object starts afresh")
}

func TestSlots(t *testing.T) {
	g := NewWithT(t)
	var s Slots
	r1, err := s.Take("a", 4, "git fetch slots")
	g.Expect(err).NotTo(HaveOccurred())
	r2, err := s.Take("a", 4, "git fetch slots")
	g.Expect(err).NotTo(HaveOccurred())
	_, err = s.Take("a", 4, "git fetch slots")
	g.Expect(outcome.IsWaiting(err)).To(BeTrue(), "half of 4 slots per namespace")
	g.Expect(err).To(MatchError(ContainSubstring("namespace a already holds its share of the git fetch slots")))
	r3, err := s.Take("b", 4, "git fetch slots")
	g.Expect(err).NotTo(HaveOccurred(), "another namespace still gets one")
	r1()
	r4, err := s.Take("a", 4, "git fetch slots")
	g.Expect(err).NotTo(HaveOccurred(), "a released slot can be taken again")
	r2()
	r3()
	r4()
}
