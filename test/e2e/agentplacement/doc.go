// Package agentplacement holds the end-to-end specs of where agents run and
// how they pull their image, and of what Fleet's UI and dashboards read: a
// downstream cluster joined with the real `fleet` CLI and `fleet-agent`
// binary gets the PriorityClass, PodDisruptionBudget and image pull secrets
// a Cluster's agentSchedulingCustomization and the manager's
// --agent-image-pull-secrets ask for, through its agent Bundle, and loses
// them with the customization; an imported cluster gets them with its agent
// and loses them with it; and the manager's metrics endpoint serves Fleet's
// per-object series (fleet_bundle_state, ...) with --per-object-metrics.
//
// PlacementSpec takes a context and a function returning its SpecInput, so
// that a suite decides what it runs against; the suite of this directory
// (suite_test.go) starts local control planes and the manager's controllers
// in process.
package agentplacement
