package outcome

import (
	"errors"
	"fmt"
	"time"
)

// Stalling is a failure that retrying cannot fix: a person must change the
// object, a Secret it names or the repository it reads. Reason is the
// condition reason (a constant of api/v1alpha1) and the message says what to
// change.
type Stalling struct {
	Reason string
	Err    error
}

func (e *Stalling) Error() string { return e.Err.Error() }
func (e *Stalling) Unwrap() error { return e.Err }

// Waiting is a failure or a pause that goes away by itself: a dependency not
// there yet, a cluster not reachable, a bound reached. Reason is the
// condition reason; After, when set, is when to look again (otherwise the
// controller's backoff decides).
type Waiting struct {
	Reason string
	After  time.Duration
	Err    error
}

func (e *Waiting) Error() string { return e.Err.Error() }
func (e *Waiting) Unwrap() error { return e.Err }

// Stall wraps err as a Stalling error with reason. A nil err stays nil.
func Stall(reason string, err error) error {
	if err == nil {
		return nil
	}
	return &Stalling{Reason: reason, Err: err}
}

// Stallf is Stall with a formatted message (%w wraps as in fmt.Errorf).
func Stallf(reason, format string, args ...any) error {
	return &Stalling{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// Wait wraps err as a Waiting error with reason, to be looked at again after
// the given duration (0: with the controller's backoff). A nil err stays nil.
func Wait(reason string, after time.Duration, err error) error {
	if err == nil {
		return nil
	}
	return &Waiting{Reason: reason, After: after, Err: err}
}

// Waitf is Wait with a formatted message.
func Waitf(reason string, after time.Duration, format string, args ...any) error {
	return &Waiting{Reason: reason, After: after, Err: fmt.Errorf(format, args...)}
}

// IsStalling tells whether err, or an error it wraps, is Stalling.
func IsStalling(err error) bool {
	var s *Stalling
	return errors.As(err, &s)
}

// IsWaiting tells whether err, or an error it wraps, is Waiting.
func IsWaiting(err error) bool {
	var w *Waiting
	return errors.As(err, &w)
}

// ReasonOf is the condition reason that err carries, or fallback when it
// carries none (a plain, transient error).
func ReasonOf(err error, fallback string) string {
	var s *Stalling
	if errors.As(err, &s) && s.Reason != "" {
		return s.Reason
	}
	var w *Waiting
	if errors.As(err, &w) && w.Reason != "" {
		return w.Reason
	}
	return fallback
}
