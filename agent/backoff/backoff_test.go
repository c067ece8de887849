package backoff

import (
	"context"
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestNextGrowsJittersAndCaps(t *testing.T) {
	g := NewWithT(t)
	b := &Backoff{Min: 100 * time.Millisecond, Max: time.Second}
	// 100ms, 200ms, 400ms, 800ms, then the cap: each drawn from [d/2, d).
	for _, ms := range []int{100, 200, 400, 800, 1000, 1000, 1000} {
		d := time.Duration(ms) * time.Millisecond
		got := b.Next()
		g.Expect(got).To(And(BeNumerically(">=", d/2), BeNumerically("<", d)), "attempt with %s", d)
	}
	b.Reset()
	g.Expect(b.Next()).To(BeNumerically("<", 100*time.Millisecond), "Reset starts over")
}

func TestNextNeverOverflows(t *testing.T) {
	b := &Backoff{Min: time.Millisecond, Max: time.Hour}
	for range 2000 {
		if d := b.Next(); d <= 0 || d >= time.Hour {
			t.Fatalf("wait %s outside (0, 1h)", d)
		}
	}
}

func TestNewFloors(t *testing.T) {
	g := NewWithT(t)
	b := New(0, 0)
	g.Expect(b.Min).To(Equal(100 * time.Millisecond))
	g.Expect(b.Max).To(Equal(time.Second))
	b = New(2*time.Second, time.Minute)
	g.Expect(b.Min).To(Equal(2 * time.Second))
	g.Expect(b.Max).To(Equal(time.Minute))
}

func TestWaitRespectsCeilingAndContext(t *testing.T) {
	g := NewWithT(t)
	b := &Backoff{Min: time.Hour, Max: time.Hour}
	start := time.Now()
	g.Expect(b.Wait(context.Background(), 20*time.Millisecond, "", nil)).To(BeTrue())
	g.Expect(time.Since(start)).To(BeNumerically("<", time.Second), "the ceiling bounds the wait")

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	start = time.Now()
	g.Expect(b.Wait(ctx, 0, "Retrying", errors.New("down"))).To(BeFalse(), "an ended context ends the wait")
	g.Expect(time.Since(start)).To(BeNumerically("<", time.Second))
}

func TestRepeatBacksOffOnFailureAndResetsOnSuccess(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b := &Backoff{Min: 10 * time.Millisecond, Max: 40 * time.Millisecond}
	var calls []time.Time
	fail := errors.New("manager unreachable")
	Repeat(ctx, b, 0, "Failed, retrying", func(context.Context) (time.Duration, error) {
		calls = append(calls, time.Now())
		switch len(calls) {
		case 1, 2, 3:
			return 0, fail
		case 4:
			// The backoff grew over three failures.
			g.Expect(b.attempt).To(Equal(3))
			return time.Millisecond, nil
		case 5:
			g.Expect(b.attempt).To(Equal(0), "a success starts the backoff over")
			return 0, fail
		default:
			cancel()
			return time.Hour, nil
		}
	})
	g.Expect(calls).To(HaveLen(6), "Repeat returns once ctx ends")
	// Failures wait at least half of 10, 20 and 40 ms.
	g.Expect(calls[3].Sub(calls[0])).To(BeNumerically(">=", 35*time.Millisecond))
}
