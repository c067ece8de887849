package outcome

import (
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/gitfleet/fleet/internal/conditions"
)

// Result turns a reconcile's error into what controller-runtime should do
// next:
//   - nil: come back after poll (0: only when something changes);
//   - Stalling: a kind that polls (poll > 0) keeps polling, since the next
//     poll may bring the fix (a push to git); others stop
//     (reconcile.TerminalError) until a watched object changes;
//   - Waiting with After: come back then, without backoff;
//   - anything else (Waiting without After included): retry with backoff.
func Result(err error, poll time.Duration) (ctrl.Result, error) {
	var w *Waiting
	switch {
	case err == nil:
		return ctrl.Result{RequeueAfter: poll}, nil
	case IsStalling(err) && poll > 0:
		return ctrl.Result{RequeueAfter: poll}, nil
	case IsStalling(err):
		return ctrl.Result{}, reconcile.TerminalError(err)
	case errors.As(err, &w) && w.After > 0:
		return ctrl.Result{RequeueAfter: w.After}, nil
	}
	return ctrl.Result{}, err
}

// Condition is the condition of type t after a reconcile that ended with err:
// True with the success reason and message when err is nil, False with the
// error's reason (fallback for a plain error) and its message otherwise.
func Condition(t string, err error, success, message, fallback string) metav1.Condition {
	if err == nil {
		return metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: success, Message: message}
	}
	return metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: ReasonOf(err, fallback), Message: err.Error()}
}

// Input is what Compute needs to know of one reconcile.
type Input struct {
	// Object is the reconciled object; its condition is set and the events
	// are about it.
	Object client.Object
	// Condition, when set, is the condition type that reports the outcome:
	// True with SuccessReason/SuccessMessage, or False with the error's
	// reason (FallbackReason for a plain error) and message. Object must
	// then have conditions (conditions.Setter).
	Condition      string
	SuccessReason  string
	SuccessMessage string
	FallbackReason string
	// Err is the error the reconcile's phases ended with.
	Err error
	// Poll is the interval of a kind that polls (a GitRepo): it comes back
	// after Poll even when stalled. 0 for the others.
	Poll time.Duration
	// After, when set, is when to come back after a success (a check due,
	// a batch held back); the sooner of After and Poll wins.
	After time.Duration
	// Recorder, when set, gets the events the watched conditions' changes
	// deserve (RecordEvents): Condition's, with Action, and Events'.
	Recorder events.EventRecorder
	// Related is the object the events also concern (may be nil).
	Related runtime.Object
	// Action names what the controller did, for Condition's events (e.g.
	// "Import").
	Action string
	// Events are further conditions, set by the caller's status functions,
	// whose changes are news.
	Events []Watch
	// Before are Object's conditions as the reconcile found them, which
	// the events compare with; default: its conditions when Compute is
	// called.
	Before []metav1.Condition
}

// Compute turns one reconcile's outcome into the object's condition, an
// event for each watched condition that changed, and the controller-runtime
// result. It changes only the object in memory: the caller's deferred
// status write (PatchStatus, or conditions.ApplyStatus) writes it. Errors
// controller-runtime will log (those it retries) are not logged here; a
// stall that polling hides from controller-runtime is, once, when it is new.
func Compute(ctx context.Context, in Input) (ctrl.Result, error) {
	getter, _ := in.Object.(conditions.Getter)
	before := in.Before
	if before == nil && getter != nil {
		before = append([]metav1.Condition(nil), getter.GetConditions()...)
	}
	watches := in.Events
	if setter, ok := in.Object.(conditions.Setter); ok && in.Condition != "" {
		conditions.Set(setter, Condition(in.Condition, in.Err, in.SuccessReason, in.SuccessMessage, in.FallbackReason))
		watches = append([]Watch{{Condition: in.Condition, Action: in.Action}}, watches...)
	}
	var after []metav1.Condition
	if getter != nil {
		after = getter.GetConditions()
		RecordEvents(in.Recorder, in.Object, in.Related, before, after, watches...)
	}
	res, err := Result(in.Err, in.Poll)
	if in.Err != nil && err == nil && IsStalling(in.Err) {
		logStalls(ctx, in.Object, before, after, watches)
	}
	if in.Err == nil && in.After > 0 && (res.RequeueAfter == 0 || in.After < res.RequeueAfter) {
		res.RequeueAfter = in.After
	}
	return res, err
}
