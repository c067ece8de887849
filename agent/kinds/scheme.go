package kinds

import (
	"sync"

	"k8s.io/apimachinery/pkg/runtime"

	"github.com/gitfleet/fleet/internal/scheme"
)

// Scheme knows core types and fleet's (internal/scheme.New). It is built
// once and shared by every client the agent makes, of the manager's API
// server and of its own cluster, and by fleet-agent-deploy's (building one
// takes about 1.5 ms of CPU and many allocations, and thousands of agents
// registering at once in one process spent a fifth of their CPU on it): add
// nothing to it (NewScheme).
func Scheme() *runtime.Scheme { return sharedScheme() }

var sharedScheme = sync.OnceValue(NewScheme)

// NewScheme builds a scheme like Scheme's, for a caller that adds kinds.
func NewScheme() *runtime.Scheme { return scheme.New() }
