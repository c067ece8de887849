package content

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

func TestUntilCollected(t *testing.T) {
	created := time.Unix(1000, 0)
	cases := []struct {
		name       string
		refs       int
		now        time.Time
		wantWait   time.Duration
		wantUnused bool
	}{
		{name: "referenced, however old", refs: 2, now: created.Add(time.Hour)},
		{name: "unreferenced within its grace", now: created.Add(20 * time.Second), wantWait: 40 * time.Second, wantUnused: true},
		{name: "unreferenced at the end of its grace", now: created.Add(time.Minute), wantUnused: true},
		{name: "unreferenced long after", now: created.Add(time.Hour), wantUnused: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			wait, unused := untilCollected(created, tc.refs, time.Minute, tc.now)
			g.Expect(wait).To(Equal(tc.wantWait))
			g.Expect(unused).To(Equal(tc.wantUnused))
		})
	}
}

func TestCountDue(t *testing.T) {
	now := time.Unix(1000, 0)
	moving := &held{refs: 40, since: now.Add(-20 * time.Second)}
	cases := []struct {
		name          string
		written, refs int
		prev          *held
		now           time.Time
		want          bool
	}{
		{name: "unchanged", written: 5, refs: 5},
		{name: "a count that moved, first seen: held", written: 5, refs: 7},
		{name: "first referenced, first seen: held too", written: 0, refs: 3},
		{name: "no longer referenced, settled", written: 300, refs: 0, prev: &held{refs: 0, since: now}, now: now, want: true},
		{name: "still moving within the hold", written: 5, refs: 60, prev: moving, now: now},
		{name: "the same as at the last look: settled", written: 5, refs: 40, prev: moving, now: now, want: true},
		{name: "still moving at the end of the hold", written: 5, refs: 90, prev: moving, now: now.Add(40 * time.Second), want: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(countDue(tc.written, tc.refs, tc.prev, time.Minute, tc.now)).To(Equal(tc.want))
		})
	}
}
