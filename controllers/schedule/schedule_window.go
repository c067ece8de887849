package schedule

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
	// The time zone database, for managers whose image has none.
	_ "time/tzdata"

	"github.com/robfig/cron/v3"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// parser reads Fleet's cron form (six fields, seconds first) and the classic
// five without seconds, and descriptors (@daily, @every 1h).
var parser = cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom | cron.Month | cron.Dow | cron.Descriptor)

// gapsChecked is how many intervals between windows a duration is checked
// against: schedules such as "0 0 9,10 * * *" have short and long ones.
const gapsChecked = 16

// FieldError is an invalid field of a Schedule's spec.
type FieldError struct {
	// Field is the spec field at fault (spec.schedule, spec.duration,
	// spec.location).
	Field string
	// Reason is the condition reason for it.
	Reason string
	Err    error
}

func (e *FieldError) Error() string { return e.Field + ": " + e.Err.Error() }

func (e *FieldError) Unwrap() error { return e.Err }

// Window is where a Schedule stands at one instant.
type Window struct {
	// Active: a window is open.
	Active bool
	// End is when the open window closes (zero when none is open).
	End time.Time
	// NextStart is when the next window opens.
	NextStart time.Time
}

// Change is the next instant at which Active changes.
func (w Window) Change() time.Time {
	if w.Active {
		return w.End
	}
	return w.NextStart
}

// Spec is a parsed, checked Schedule spec.
type Spec struct {
	sched    cron.Schedule
	duration time.Duration
	loc      *time.Location
}

// Parse checks a Schedule's schedule, duration and location, as of now (the
// duration must be shorter than every interval between the next windows,
// as Fleet requires of the first), and returns the first field at fault as
// a *FieldError. An empty location is the manager's local time zone, as in
// Fleet.
func Parse(schedule string, duration time.Duration, location string, now time.Time) (*Spec, error) {
	loc := time.Local
	if location != "" {
		l, err := time.LoadLocation(location)
		if err != nil {
			return nil, &FieldError{Field: "spec.location", Reason: fleet.ReasonInvalidLocation, Err: fmt.Errorf("unknown time zone %q", location)}
		}
		loc = l
	}
	expr, err := quartzToCron(schedule)
	if err == nil {
		var sched cron.Schedule
		sched, err = parser.Parse(expr)
		if err == nil {
			s := &Spec{sched: sched, duration: duration, loc: loc}
			err = s.checkDuration(now)
			return s, err
		}
	}
	return nil, &FieldError{Field: "spec.schedule", Reason: fleet.ReasonInvalidSchedule, Err: fmt.Errorf("%q is not a cron expression: %w", schedule, err)}
}

func (s *Spec) checkDuration(now time.Time) error {
	if s.duration <= 0 {
		return &FieldError{Field: "spec.duration", Reason: fleet.ReasonInvalidDuration, Err: fmt.Errorf("%s is not a positive duration", s.duration)}
	}
	t := s.sched.Next(now.In(s.loc))
	if t.IsZero() {
		return &FieldError{Field: "spec.schedule", Reason: fleet.ReasonInvalidSchedule, Err: errors.New("it never fires")}
	}
	for range gapsChecked {
		next := s.sched.Next(t)
		if next.IsZero() {
			break
		}
		if gap := next.Sub(t); s.duration >= gap {
			return &FieldError{Field: "spec.duration", Reason: fleet.ReasonInvalidDuration,
				Err: fmt.Errorf("%s is not shorter than the %s between the windows at %s and %s", s.duration, gap, t.Format(time.RFC3339), next.Format(time.RFC3339))}
		}
		t = next
	}
	return nil
}

// At returns where the schedule stands at now: a window is open when it
// started at most duration ago (duration is elapsed time, so a window
// across a change of daylight saving time lasts as long as any other).
func (s *Spec) At(now time.Time) Window {
	now = now.In(s.loc)
	// The first start after now-duration: if it is not after now, its
	// window is open (windows never overlap: duration is shorter than the
	// interval between them).
	start := s.sched.Next(now.Add(-s.duration))
	if start.IsZero() || start.After(now) {
		return Window{NextStart: start}
	}
	return Window{Active: true, End: start.Add(s.duration), NextStart: s.sched.Next(start)}
}

// quartzToCron turns Fleet's Quartz form into robfig/cron's: a seventh
// (year) field of "*" or "?" is dropped, and in the six-field form the
// numbers of the day-of-week field, 1-7 from Sunday in Quartz, become 0-6.
// Five fields (no seconds) are classic cron and left as they are.
func quartzToCron(expr string) (string, error) {
	fields := strings.Fields(expr)
	if len(fields) == 0 {
		return "", errors.New("it is empty")
	}
	if strings.HasPrefix(fields[0], "@") || len(fields) < 6 {
		return expr, nil
	}
	if len(fields) == 7 {
		if fields[6] != "*" && fields[6] != "?" {
			return "", fmt.Errorf("a year field (%q) is not supported", fields[6])
		}
		fields = fields[:6]
	}
	if len(fields) != 6 {
		return "", fmt.Errorf("it has %d fields, not 5, 6 or 7", len(fields))
	}
	dow, err := shiftDow(fields[5])
	if err != nil {
		return "", err
	}
	fields[5] = dow
	return strings.Join(fields, " "), nil
}

// shiftDow shifts the day numbers (not the steps) of a Quartz day-of-week
// field down by one.
func shiftDow(field string) (string, error) {
	parts := strings.Split(field, ",")
	for i, p := range parts {
		rng, step, hasStep := strings.Cut(p, "/")
		bounds := strings.Split(rng, "-")
		for j, b := range bounds {
			n, err := strconv.Atoi(b)
			if err != nil {
				continue // a name, * or ?
			}
			if n < 1 || n > 7 {
				return "", fmt.Errorf("day of week %d is not within 1-7 (SUN-SAT)", n)
			}
			bounds[j] = strconv.Itoa(n - 1)
		}
		parts[i] = strings.Join(bounds, "-")
		if hasStep {
			parts[i] += "/" + step
		}
	}
	return strings.Join(parts, ","), nil
}
