package outcome

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Watch names a condition whose changes are news, and the action the event
// about it names (e.g. "Sync", "Poll").
type Watch struct {
	Condition string
	Action    string
	// Kind decides the event a change from was to now deserves: an event
	// type, or "" for none. Default ConditionEvent.
	Kind func(was, now *metav1.Condition) string
}

// ConditionEvent is the event a condition's change from was to now
// deserves: a Warning when it turns False, or stays False with another
// reason; a Normal when it turns True from False; none otherwise (the first
// success, a new message with the same reason, Unknown).
func ConditionEvent(was, now *metav1.Condition) string {
	switch {
	case now == nil:
		return ""
	case now.Status == metav1.ConditionFalse && (was == nil || was.Status != metav1.ConditionFalse || was.Reason != now.Reason):
		return corev1.EventTypeWarning
	case now.Status == metav1.ConditionTrue && was != nil && was.Status == metav1.ConditionFalse:
		return corev1.EventTypeNormal
	}
	return ""
}

// RecordEvents records, about obj (and related, which may be nil), the
// event that each watched condition's change from before to after deserves,
// with the condition's reason and its message cut to 1 KiB. A nil rec
// records nothing. It returns how many Warnings were due, recorded or not.
func RecordEvents(rec events.EventRecorder, obj, related runtime.Object, before, after []metav1.Condition, watches ...Watch) int {
	warnings := 0
	for _, w := range watches {
		was, now := meta.FindStatusCondition(before, w.Condition), meta.FindStatusCondition(after, w.Condition)
		decide := w.Kind
		if decide == nil {
			decide = ConditionEvent
		}
		kind := decide(was, now)
		if kind == "" || now == nil {
			continue
		}
		if kind == corev1.EventTypeWarning {
			warnings++
		}
		if rec != nil {
			rec.Eventf(obj, related, kind, now.Reason, w.Action, "%s", truncate(now.Message, 1024))
		}
	}
	return warnings
}

// logStalls logs the conditions of after that turned to a new failure,
// for a stall that polling hides from controller-runtime (which logs the
// errors it is given).
func logStalls(ctx context.Context, obj client.Object, before, after []metav1.Condition, watches []Watch) {
	for _, w := range watches {
		was, now := meta.FindStatusCondition(before, w.Condition), meta.FindStatusCondition(after, w.Condition)
		if ConditionEvent(was, now) == corev1.EventTypeWarning {
			ctrl.LoggerFrom(ctx).Info("Stalled until the next poll", "object", klog.KObj(obj), "action", w.Action,
				"reason", now.Reason, "message", now.Message)
		}
	}
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
