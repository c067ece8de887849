package agentmanifest

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/gitfleet/fleet/internal/memlimit"
)

// The agent's requests and limits unless a Cluster's agentResources say
// otherwise, set from what `make bench EXPERIMENTS=agent` measures of the
// agent as it ships (docs/scale.md, "Edge clusters"): the resident fleet-agent
// settled with 50 bundles (36 MB) fits the request with room to grow; the
// limit holds it and two fleet-agent-deploy children at their peak (about
// 65 MB each, the agent's default --deploy-concurrency), with room left for
// a large chart being rendered; an idle agent uses well under a thousandth
// of a core, and a deploy is short, so no CPU limit slows a rollout.
var (
	DefaultCPURequest    = resource.MustParse("10m")
	DefaultMemoryRequest = resource.MustParse("64Mi")
	DefaultMemoryLimit   = resource.MustParse("256Mi")
)

// DefaultResources returns the agent container's default requests and
// limits.
func DefaultResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: DefaultCPURequest, corev1.ResourceMemory: DefaultMemoryRequest},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: DefaultMemoryLimit},
	}
}

// GoMemLimit is the GOMEMLIMIT for a container with these resources:
// memlimit.Ratio (80%) of its memory limit, the share the manager gives
// itself, so the Go runtime collects harder before the kernel kills it, and
// leaves room for what is not Go heap (the binary's pages, stacks). "" without
// a memory limit.
func GoMemLimit(r corev1.ResourceRequirements) string {
	limit, ok := r.Limits[corev1.ResourceMemory]
	if !ok || limit.IsZero() {
		return ""
	}
	return fmt.Sprintf("%dMiB", int64(float64(limit.Value())*memlimit.Ratio)>>20)
}

func hasEnv(env []corev1.EnvVar, name string) bool {
	for _, e := range env {
		if e.Name == name {
			return true
		}
	}
	return false
}
