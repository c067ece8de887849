// Package workloads holds the end-to-end specs that check the agent's
// readiness and the manager's rollout against Kubernetes' own controllers:
// the downstream clusters run kube-controller-manager, kube-scheduler and
// kwok (simulated nodes and pod lifecycles, see test/controlplane), so a
// Deployment's status, a Job's completion and a pod's replacement are what
// Kubernetes makes of them, not what a test writes. A container image that
// starts with controlplane.FailImagePrefix cannot be pulled on the simulated
// nodes, which makes stalled rollouts and failing Jobs real.
//
// WorkloadsSpec takes a context and a function returning its SpecInput; the
// suite of this directory (suite_test.go) starts the control planes and the
// manager's controllers in process.
package workloads
