package deployrpc

import (
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// The bounds of one run of the deploy binary. The bundle's author controls
// what the child renders (a chart's templates may loop, or build lists of a
// billion items); nothing the bundle says widens them, only the agent's
// flags (or their environment variables, which a Cluster's agentEnvVars
// set).
const (
	// DefaultTimeout is how long one run may take: rendering, applying and
	// Helm's wait (helm.timeoutSeconds) together. A wait longer than this
	// needs a larger bound.
	DefaultTimeout = 10 * time.Minute
	// DefaultMemoryLimit is how much memory one run may map (its data
	// segment: heap, stacks, buffers; not the binary's own pages), in bytes.
	// A deploy needs some tens of MB; rendering a large chart, a few
	// hundred.
	DefaultMemoryLimit = 512 << 20
	// TimeoutEnv and MemoryLimitEnv set the bounds when the agent's flags
	// (--deploy-timeout, --deploy-memory-limit) do not.
	TimeoutEnv     = "FLEET_AGENT_DEPLOY_TIMEOUT"
	MemoryLimitEnv = "FLEET_AGENT_DEPLOY_MEMORY_LIMIT"
	// minBoundRetry is the least a deploy stopped at a bound waits before
	// it is tried again (the reconciler doubles it while it keeps hitting
	// the bound).
	minBoundRetry = time.Minute
	// killWait is how long Run waits for the child's output to end once
	// it killed the child's process group.
	killWait = 5 * time.Second
)

// raiseTimeout and raiseMemory say how to widen a bound, for messages.
const (
	raiseTimeout = "raise the agent's bound with its --deploy-timeout flag or the environment variable " + TimeoutEnv +
		" (a Cluster's spec.agentEnvVars sets it)"
	raiseMemory = "raise the agent's bound with its --deploy-memory-limit flag or the environment variable " + MemoryLimitEnv +
		" (a Cluster's spec.agentEnvVars sets it), and the agent container's memory limit (spec.agentResources) with it"
)

// timedOut is the error of a run stopped at its time bound.
func timedOut(req *Request, bound time.Duration) error {
	return outcome.Waitf(fleet.ReasonDeployTimedOut, max(minBoundRetry, bound),
		"%s %s of release %s ran longer than the agent's bound of %s and was stopped: a chart whose templates loop, "+
			"or a Helm wait (helm.timeoutSeconds) as long as the bound, does this; fix the chart, or %s",
		BinaryName, req.Op, req.release(), bound, raiseTimeout)
}

// outOfMemory is the error of a run that met its memory bound; how tells
// how it ended.
func outOfMemory(req *Request, bound int64, timeout time.Duration, how string) error {
	return outcome.Waitf(fleet.ReasonDeployOutOfMemory, max(minBoundRetry, timeout),
		"%s %s of release %s ran out of memory (the agent's bound is %s per deploy): %s; a chart whose templates build "+
			"huge lists or strings does this; fix the chart, or %s",
		BinaryName, req.Op, req.release(), resource.NewQuantity(bound, resource.BinarySI), how, raiseMemory)
}

// IsBound tells whether err is a deploy stopped at one of its bounds.
func IsBound(err error) bool {
	switch outcome.ReasonOf(err, "") {
	case fleet.ReasonDeployTimedOut, fleet.ReasonDeployOutOfMemory:
		return true
	}
	return false
}

// outOfMemoryLine tells whether a line the child wrote says that the Go
// runtime could not map more memory: the end of a child that met its
// memory bound.
func outOfMemoryLine(line string) bool {
	return (strings.HasPrefix(line, "fatal error:") && strings.Contains(line, "out of memory")) ||
		strings.HasPrefix(line, "runtime: out of memory") ||
		strings.Contains(line, "pthread_create failed")
}

// ParseMemoryLimit reads a memory bound: a Kubernetes quantity ("512Mi").
func ParseMemoryLimit(s string) (int64, error) {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return 0, fmt.Errorf("memory bound %q: %w", s, err)
	}
	if q.Sign() <= 0 {
		return 0, fmt.Errorf("memory bound %q is not positive", s)
	}
	return q.Value(), nil
}
