// Package outcome is the manager's one error vocabulary and the one place
// that turns a reconcile's outcome into a condition, an event and a
// controller-runtime result.
//
// A reconcile's phases return:
//   - nil;
//   - a Stalling error (Stall, Stallf) for what only a person can fix: a bad
//     fleet.yaml, a missing Secret, a kubeconfig the cluster rejects. It
//     carries the condition Reason (a constant of api/v1alpha1) and a message
//     that says what to change;
//   - a Waiting error (Wait, Waitf) for what fixes itself: a dependency not
//     there yet, a bound reached, a cluster briefly unreachable;
//   - any other error, which is transient and retried with backoff.
//
// Compute (or Result and Condition on their own, for kinds whose status is a
// set of conditions computed elsewhere) maps these onto controller-runtime:
// a kind that polls keeps polling after a Stalling error, others stop with
// reconcile.TerminalError until a watched object changes.
//
// A reconcile ends in one deferred step: the caller computes the status,
// Compute sets the outcome's condition, records the events the watched
// conditions' changes deserve (RecordEvents, ConditionEvent) and decides
// the result, and PatchStatus writes the status once, when it changed (a
// conflict is a short Wait); Finish does the three. A status several
// writers share is applied instead (conditions.ApplyStatus), and Written
// combines that write's error with the outcome.
package outcome
