//go:build tools

// Package test pins, in go.mod, the versions of the code generators and test
// runners the Makefile builds into bin/.
package test

import (
	_ "github.com/onsi/ginkgo/v2/ginkgo"
	_ "sigs.k8s.io/controller-tools/cmd/controller-gen"
)
