// Package framework holds what the end-to-end suites share: building the
// project's binaries once, running them as processes with their logs kept,
// applying YAML as a user would with kubectl, and running the manager's
// controllers in-process against a control plane.
package framework
