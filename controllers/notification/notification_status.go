package notification

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	notification "github.com/gitfleet/fleet/api/notification/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// setConditions sets Ready from the reconcile's error and what it
// followed, and DestinationFailing from the last send (left as it was when
// nothing was sent).
func setConditions(s *scope, err error) {
	meta.SetStatusCondition(&s.n.Status.Conditions, readyCondition(s.n, err, s.followed, s.selected))
	if c, ok := destinationCondition(s.sent, s.sendErr); ok {
		c.ObservedGeneration = s.n.Generation
		meta.SetStatusCondition(&s.n.Status.Conditions, c)
	}
}

// readyCondition is True while the Notification follows all its sources,
// False with what to fix otherwise.
func readyCondition(n *notification.Notification, err error, followed, selected int) metav1.Condition {
	c := metav1.Condition{Type: notification.ConditionReady, ObservedGeneration: n.Generation}
	switch {
	case err != nil:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, outcome.ReasonOf(err, notification.ReasonInvalidSpec), err.Error()
		if !outcome.IsStalling(err) && !outcome.IsWaiting(err) {
			c.Reason = "Error"
		}
	case n.Spec.Suspend:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, notification.ReasonSuspended, "spec.suspend is set: nothing is sent"
	case selected > followed:
		c.Status, c.Reason = metav1.ConditionFalse, notification.ReasonTooManySources
		c.Message = fmt.Sprintf("the selector selects %d sources; the first %d by kind and name are followed: narrow spec.sources.selector or split the Notification",
			selected, followed)
	default:
		c.Status, c.Reason = metav1.ConditionTrue, notification.ReasonReady
		c.Message = fmt.Sprintf("following %d %s", followed, plural(followed, "source", "sources"))
	}
	return c
}

// destinationCondition is DestinationFailing after a send: True with the
// error's reason and message, False after a delivery; ok is false when
// nothing was tried.
func destinationCondition(sent bool, err error) (metav1.Condition, bool) {
	switch {
	case err != nil:
		return metav1.Condition{Type: notification.ConditionDestinationFailing, Status: metav1.ConditionTrue,
			Reason: outcome.ReasonOf(err, notification.ReasonSendFailed), Message: err.Error()}, true
	case sent:
		return metav1.Condition{Type: notification.ConditionDestinationFailing, Status: metav1.ConditionFalse,
			Reason: notification.ReasonSent, Message: "the last message was delivered"}, true
	}
	return metav1.Condition{}, false
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
