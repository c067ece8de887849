//go:build tools

// Package kwok pins the version of kwok, which simulates nodes and the
// lifecycle of pods on clusters that run workloads (see ../build.sh). It is a
// module of its own so that kwok's dependencies never move those of the
// Kubernetes binaries in the parent module.
package kwok

import (
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
