// Package controllers wires the manager: it registers every reconciler (one
// package each below this one) with a controller-runtime manager and runs it
// with leader election, health probes and metrics. cmd/fleet-manager is only
// its flags.
package controllers
