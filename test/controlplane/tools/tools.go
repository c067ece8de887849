//go:build tools

// Package tools pins the sources of the local control plane binaries
// (kube-apiserver and etcd, and for clusters that run workloads
// kube-controller-manager and kube-scheduler) that tests, benchmarks and the
// demo run. It is a module of its own so that the project's module never
// depends on k8s.io/kubernetes. kwok, which simulates nodes and pods, has a
// module of its own below (kwok/) so that its dependencies cannot move those
// of the Kubernetes binaries.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
