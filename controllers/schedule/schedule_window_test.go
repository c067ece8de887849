package schedule

import (
	"errors"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func mustLoc(t *testing.T, name string) *time.Location {
	t.Helper()
	l, err := time.LoadLocation(name)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestWindowAt(t *testing.T) {
	berlin := mustLoc(t, "Europe/Berlin")
	ny := mustLoc(t, "America/New_York")
	tokyo := mustLoc(t, "Asia/Tokyo")
	at := func(l *time.Location, y int, mo time.Month, d, h, mi, s int) time.Time {
		return time.Date(y, mo, d, h, mi, s, 0, l)
	}
	cases := []struct {
		name      string
		schedule  string
		duration  time.Duration
		location  string
		now       time.Time
		active    bool
		end       time.Time
		nextStart time.Time
	}{{
		name: "Fleet's e2e form: every minute for 30s, inside", schedule: "0 */1 * * * *", duration: 30 * time.Second, location: "UTC",
		now: at(time.UTC, 2026, 5, 4, 10, 0, 10), active: true, end: at(time.UTC, 2026, 5, 4, 10, 0, 30), nextStart: at(time.UTC, 2026, 5, 4, 10, 1, 0),
	}, {
		name: "every minute for 30s, outside", schedule: "0 */1 * * * *", duration: 30 * time.Second, location: "UTC",
		now: at(time.UTC, 2026, 5, 4, 10, 0, 45), nextStart: at(time.UTC, 2026, 5, 4, 10, 1, 0),
	}, {
		name: "the window's first second is inside", schedule: "0 */1 * * * *", duration: 30 * time.Second, location: "UTC",
		now: at(time.UTC, 2026, 5, 4, 10, 0, 0), active: true, end: at(time.UTC, 2026, 5, 4, 10, 0, 30), nextStart: at(time.UTC, 2026, 5, 4, 10, 1, 0),
	}, {
		name: "its end is outside", schedule: "0 */1 * * * *", duration: 30 * time.Second, location: "UTC",
		now: at(time.UTC, 2026, 5, 4, 10, 0, 30), nextStart: at(time.UTC, 2026, 5, 4, 10, 1, 0),
	}, {
		name: "nightly in Berlin, read in Berlin time: 21:30 UTC is 23:30 CEST, inside", schedule: "0 0 22 * * *", duration: 2 * time.Hour, location: "Europe/Berlin",
		now: at(time.UTC, 2026, 6, 1, 21, 30, 0), active: true, end: at(berlin, 2026, 6, 2, 0, 0, 0), nextStart: at(berlin, 2026, 6, 2, 22, 0, 0),
	}, {
		name: "the same instant in Tokyo time is outside", schedule: "0 0 22 * * *", duration: 2 * time.Hour, location: "Asia/Tokyo",
		now: at(time.UTC, 2026, 6, 1, 21, 30, 0), nextStart: at(tokyo, 2026, 6, 2, 22, 0, 0),
	}, {
		name: "a window across midnight, after midnight", schedule: "0 0 23 * * *", duration: 3 * time.Hour, location: "America/New_York",
		now: at(ny, 2026, 1, 10, 1, 0, 0), active: true, end: at(ny, 2026, 1, 10, 2, 0, 0), nextStart: at(ny, 2026, 1, 10, 23, 0, 0),
	}, {
		name: "Quartz day numbers: 2-6 is Monday to Friday, Saturday is outside", schedule: "0 0 9 ? * 2-6", duration: time.Hour, location: "UTC",
		now: at(time.UTC, 2026, 5, 9, 9, 30, 0), nextStart: at(time.UTC, 2026, 5, 11, 9, 0, 0),
	}, {
		name: "Quartz day numbers: Monday is inside", schedule: "0 0 9 ? * 2-6", duration: time.Hour, location: "UTC",
		now: at(time.UTC, 2026, 5, 11, 9, 30, 0), active: true, end: at(time.UTC, 2026, 5, 11, 10, 0, 0), nextStart: at(time.UTC, 2026, 5, 12, 9, 0, 0),
	}, {
		name: "day names and a year field of *", schedule: "0 0 9 ? * SAT,SUN *", duration: time.Hour, location: "UTC",
		now: at(time.UTC, 2026, 5, 10, 9, 59, 59), active: true, end: at(time.UTC, 2026, 5, 10, 10, 0, 0), nextStart: at(time.UTC, 2026, 5, 16, 9, 0, 0),
	}, {
		name: "five classic fields", schedule: "30 4 * * *", duration: time.Hour, location: "UTC",
		now: at(time.UTC, 2026, 5, 10, 5, 0, 0), active: true, end: at(time.UTC, 2026, 5, 10, 5, 30, 0), nextStart: at(time.UTC, 2026, 5, 11, 4, 30, 0),
	}, {
		// Berlin springs forward on 29 March 2026 at 02:00 CET to 03:00
		// CEST: a two-hour window from 01:30 lasts two real hours and
		// ends at 04:30 CEST on the clock.
		name: "DST spring forward: the window lasts its duration in real time", schedule: "0 30 1 * * *", duration: 2 * time.Hour, location: "Europe/Berlin",
		now: at(berlin, 2026, 3, 29, 4, 15, 0), active: true, end: at(berlin, 2026, 3, 29, 4, 30, 0), nextStart: at(berlin, 2026, 3, 30, 1, 30, 0),
	}, {
		name: "DST spring forward: the same window is shut after two real hours", schedule: "0 30 1 * * *", duration: 2 * time.Hour, location: "Europe/Berlin",
		now: at(berlin, 2026, 3, 29, 4, 31, 0), nextStart: at(berlin, 2026, 3, 30, 1, 30, 0),
	}, {
		// Berlin falls back on 25 October 2026 at 03:00 CEST to 02:00 CET:
		// from 01:30 CEST, two real hours end at 02:30 CET.
		name: "DST fall back: the window ends after two real hours, not at 03:30 on the clock", schedule: "0 30 1 * * *", duration: 2 * time.Hour, location: "Europe/Berlin",
		now: time.Date(2026, 10, 25, 1, 20, 0, 0, time.UTC), active: true, end: time.Date(2026, 10, 25, 1, 30, 0, 0, time.UTC), nextStart: at(berlin, 2026, 10, 26, 1, 30, 0),
	}, {
		name: "New York springs forward on 8 March 2026: a daily 09:00 window keeps 09:00 local", schedule: "0 0 9 * * *", duration: time.Hour, location: "America/New_York",
		now: at(ny, 2026, 3, 8, 9, 30, 0), active: true, end: at(ny, 2026, 3, 8, 10, 0, 0), nextStart: at(ny, 2026, 3, 9, 9, 0, 0),
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s, err := Parse(tc.schedule, tc.duration, tc.location, tc.now)
			g.Expect(err).NotTo(HaveOccurred())
			w := s.At(tc.now)
			g.Expect(w.Active).To(Equal(tc.active))
			g.Expect(w.NextStart).To(BeTemporally("==", tc.nextStart))
			if tc.active {
				g.Expect(w.End).To(BeTemporally("==", tc.end))
				g.Expect(w.Change()).To(BeTemporally("==", tc.end))
			} else {
				g.Expect(w.End.IsZero()).To(BeTrue())
				g.Expect(w.Change()).To(BeTemporally("==", tc.nextStart))
			}
		})
	}
}

func TestParseRefusesBadInput(t *testing.T) {
	now := time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)
	cases := []struct {
		name, schedule, location string
		duration                 time.Duration
		field, reason, message   string
	}{
		{"a cron that does not parse", "0 61 * * * *", "UTC", time.Minute, "spec.schedule", fleet.ReasonInvalidSchedule, "not a cron expression"},
		{"an empty schedule", "", "UTC", time.Minute, "spec.schedule", fleet.ReasonInvalidSchedule, "empty"},
		{"a Quartz day number out of range", "0 0 9 ? * 0", "UTC", time.Minute, "spec.schedule", fleet.ReasonInvalidSchedule, "within 1-7"},
		{"a year field", "0 0 9 * * ? 2027", "UTC", time.Minute, "spec.schedule", fleet.ReasonInvalidSchedule, "year"},
		{"an unknown time zone", "0 0 9 * * *", "Mars/Olympus_Mons", time.Minute, "spec.location", fleet.ReasonInvalidLocation, `unknown time zone "Mars/Olympus_Mons"`},
		{"no duration", "0 0 9 * * *", "UTC", 0, "spec.duration", fleet.ReasonInvalidDuration, "not a positive duration"},
		{"a duration as long as the interval", "0 */1 * * * *", "UTC", time.Minute, "spec.duration", fleet.ReasonInvalidDuration, "not shorter than the 1m0s"},
		{"a duration longer than the short gap of an uneven schedule", "0 0 9,10 * * *", "UTC", 90 * time.Minute, "spec.duration", fleet.ReasonInvalidDuration, "not shorter than the 1h0m0s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Parse(tc.schedule, tc.duration, tc.location, now)
			var fe *FieldError
			g.Expect(errors.As(err, &fe)).To(BeTrue(), "got %v", err)
			g.Expect(fe.Field).To(Equal(tc.field))
			g.Expect(fe.Reason).To(Equal(tc.reason))
			g.Expect(fe.Error()).To(ContainSubstring(tc.message))
		})
	}
}
