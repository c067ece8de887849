//go:build tools

// Package tools pins the sources of the local control plane binaries
// (kube-apiserver and etcd) that tests, benchmarks and the demo run.
// It is a module of its own so that the project's module never depends on
// k8s.io/kubernetes.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
)
