// Package controlplane starts real, independent Kubernetes control planes
// (kube-apiserver and etcd, built from source) on this machine. Tests, benchmarks
// and the local development loop use it to stand in for the manager's cluster and
// for any number of managed clusters: there is no Docker and no kubelet here, so a
// "cluster" is an API server with its own etcd, its own kube-system namespace UID
// and its own kubeconfig.
//
// A control plane started with Options.Workloads (or given StartWorkloads
// later) runs workloads too: kube-controller-manager, kube-scheduler and kwok,
// which simulates Nodes and what their kubelets would report of the pods bound
// to them (stages.yaml). Deployments roll out, Jobs complete, pods are
// replaced, yet no container runs; an image under FailImagePrefix fails. The
// suites that need none of it start API servers alone, as before.
//
// The binaries are built once by tools/build.sh into a per-user cache keyed by
// version; Assets finds them (or builds them) and Start runs one control plane
// through controller-runtime's envtest.
package controlplane
