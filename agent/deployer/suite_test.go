package deployer

import (
	"os"
	"sync"
	"testing"

	"github.com/gitfleet/fleet/test/controlplane"
)

var (
	cpOnce sync.Once
	cp     *controlplane.ControlPlane
	cpErr  error
)

// controlPlane is the package's one API server (no fleet CRDs: a bare
// downstream cluster), started by the first test that needs it; the tests
// of pure functions start none.
func controlPlane(t *testing.T) *controlplane.ControlPlane {
	t.Helper()
	cpOnce.Do(func() {
		cp, cpErr = controlplane.Start(controlplane.Options{Name: "agent-deployer", NoCRDs: true})
	})
	if cpErr != nil {
		t.Fatalf("starting a control plane: %v", cpErr)
	}
	return cp
}

func TestMain(m *testing.M) {
	code := m.Run()
	if cp != nil {
		_ = cp.Stop()
	}
	os.Exit(code)
}
