package outcome

import (
	"context"
	"errors"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
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
	// Object is the reconciled object; its condition is set and the event
	// is about it.
	Object conditions.Setter
	// Condition, when set, is the condition type that reports the outcome:
	// True with SuccessReason/SuccessMessage, or False with the error's
	// reason (FallbackReason for a plain error) and message.
	Condition      string
	SuccessReason  string
	SuccessMessage string
	FallbackReason string
	// Err is the error the reconcile's phases ended with.
	Err error
	// Poll is the interval of a kind that polls (a GitRepo): it comes back
	// after Poll even when stalled. 0 for the others.
	Poll time.Duration
	// Recorder, when set, gets a Warning event each time the condition turns
	// to a new failure, and a Normal event when it recovers.
	Recorder events.EventRecorder
	// Action names what the controller did, for events (e.g. "Import").
	Action string
}

// Compute turns one reconcile's outcome into the object's condition, an
// event when that condition changed, and the controller-runtime result. It
// changes only the object in memory: the caller's deferred status patch
// writes it. Errors controller-runtime will log (those it retries) are not
// logged here; a stall that polling hides from controller-runtime is.
func Compute(ctx context.Context, in Input) (ctrl.Result, error) {
	if in.Condition != "" && in.Object != nil {
		before := conditions.Get(in.Object, in.Condition)
		var was *metav1.Condition
		if before != nil {
			c := *before
			was = &c
		}
		now := Condition(in.Condition, in.Err, in.SuccessReason, in.SuccessMessage, in.FallbackReason)
		conditions.Set(in.Object, now)
		if in.Recorder != nil && !conditions.Same(was, &now) && (in.Err != nil || was != nil) {
			kind := corev1.EventTypeNormal
			if now.Status != metav1.ConditionTrue {
				kind = corev1.EventTypeWarning
			}
			in.Recorder.Eventf(in.Object, nil, kind, now.Reason, in.Action, "%s", truncate(now.Message, 1024))
		}
	}
	res, err := Result(in.Err, in.Poll)
	if in.Err != nil && err == nil && IsStalling(in.Err) {
		ctrl.LoggerFrom(ctx).Info("Reconcile stalled until the next poll", "object", klog.KObj(in.Object),
			"reason", ReasonOf(in.Err, in.FallbackReason), "error", in.Err.Error())
	}
	return res, err
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
