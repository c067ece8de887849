// Package conditions is the manager's one kit for status conditions: set and
// mark helpers over any fleet kind with conditions (each sets
// ObservedGeneration and keeps the transition time unless the status
// changes), and ApplyStatus, the one way a controller that shares a status
// with other writers writes its own fields (server-side apply under its
// field owner). A status one controller writes whole is patched by
// outcome.PatchStatus, which turns a conflict into a Wait (this package is
// below outcome, which sets conditions through it).
//
// Reasons are constants of api/v1alpha1; the reason of a failure comes from
// its error (package outcome).
package conditions
