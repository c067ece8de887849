// Package localcluster runs clusters on this machine without Docker or a
// kubelet: real, independent Kubernetes control planes (kube-apiserver and
// etcd, built from source by test/controlplane/tools/build.sh, started
// through controller-runtime's envtest) and the processes that run against
// them.
//
// The local development environment (`fleet dev`, internal/devenv) and the
// tests (through test/controlplane and test/framework) share it, so the
// product never imports test code. A "cluster" is an API server with its own
// etcd, its own kube-system namespace UID and its own kubeconfig.
//
// A control plane started with Options.Workloads (or given StartWorkloads
// later) runs workloads too: kube-controller-manager, kube-scheduler and kwok,
// which simulates Nodes and what their kubelets would report of the pods bound
// to them (stages.yaml). Deployments roll out, Jobs complete, pods are
// replaced, yet no container runs; an image under FailImagePrefix fails.
//
// Process runs a binary in the background with its output in a log file:
// tied to this process (StartFile) or in a session of its own that outlives
// it (StartPath); WaitReady waits for its health endpoint. ApplyYAML applies
// a YAML stream as `kubectl apply --server-side` would.
package localcluster
