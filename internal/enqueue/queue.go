package enqueue

import (
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/config"
)

// ControllerDefaults are the controller options every manager in this
// project runs with, the agent's included. The handlers of this package rely
// on the classic rate-limited work queue: AddAfter keeps one waiting entry
// per key (the earliest), and a failed reconcile is retried with backoff.
// controller-runtime's priority queue, its default since v0.22, lost the
// retries of failed reconciles under load here (a fan-out left Clusters
// errored with an empty queue), so it is switched off.
func ControllerDefaults() config.Controller {
	return config.Controller{UsePriorityQueue: ptr.To(false)}
}
