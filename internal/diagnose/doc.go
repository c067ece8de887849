// Package diagnose holds the checks of `fleet analyze`: pure functions over a
// Snapshot of the fleet's objects (read from the manager's cluster with the
// caller's own rights, or from a `fleet dump` archive), each returning
// Findings that say what is wrong, where, and what to do. Analyze runs them
// all and sorts the findings most urgent first.
package diagnose
