package conditions

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Getter is an object with status conditions: every fleet kind that has any.
type Getter interface {
	client.Object
	GetConditions() []metav1.Condition
}

// Setter is a Getter whose conditions can be replaced.
type Setter interface {
	Getter
	SetConditions([]metav1.Condition)
}

// Set adds or updates c on obj. The transition time changes only when the
// status does (meta.SetStatusCondition); ObservedGeneration is the object's
// generation unless c sets one.
func Set(obj Setter, c metav1.Condition) bool {
	if c.ObservedGeneration == 0 {
		c.ObservedGeneration = obj.GetGeneration()
	}
	conds := obj.GetConditions()
	changed := meta.SetStatusCondition(&conds, c)
	obj.SetConditions(conds)
	return changed
}

// MarkTrue sets condition t to True with reason and message.
func MarkTrue(obj Setter, t, reason, message string) bool {
	return Set(obj, metav1.Condition{Type: t, Status: metav1.ConditionTrue, Reason: reason, Message: message})
}

// MarkFalse sets condition t to False with reason and message.
func MarkFalse(obj Setter, t, reason, message string) bool {
	return Set(obj, metav1.Condition{Type: t, Status: metav1.ConditionFalse, Reason: reason, Message: message})
}

// MarkUnknown sets condition t to Unknown with reason and message.
func MarkUnknown(obj Setter, t, reason, message string) bool {
	return Set(obj, metav1.Condition{Type: t, Status: metav1.ConditionUnknown, Reason: reason, Message: message})
}

// Get returns condition t of obj, or nil.
func Get(obj Getter, t string) *metav1.Condition {
	return meta.FindStatusCondition(obj.GetConditions(), t)
}

// IsTrue tells whether condition t of obj is True.
func IsTrue(obj Getter, t string) bool {
	return meta.IsStatusConditionTrue(obj.GetConditions(), t)
}

// Same tells whether two conditions say the same thing: status, reason and
// message (times and generations aside).
func Same(a, b *metav1.Condition) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Status == b.Status && a.Reason == b.Reason && a.Message == b.Message
}
