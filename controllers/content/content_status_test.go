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
