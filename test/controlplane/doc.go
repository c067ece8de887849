// Package controlplane is the tests' name for internal/localcluster, which
// starts real, independent Kubernetes control planes (kube-apiserver and etcd,
// built from source; with Options.Workloads also kube-controller-manager,
// kube-scheduler and kwok's simulated nodes) on this machine. The product's
// `fleet dev` uses localcluster directly; tests, benchmarks and the Ginkgo
// suites use it through this package, whose names stand for localcluster's.
//
// tools/ is the module that pins the control plane binaries' versions;
// tools/build.sh builds them once into a per-user cache keyed by version
// (`make controlplane`), where localcluster.Assets finds them.
package controlplane
