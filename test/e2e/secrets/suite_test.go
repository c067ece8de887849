package secrets_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/e2e/secrets"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// suiteInput: a manager control plane with the manager's controllers in
// this process, three downstream control planes (objects only: a Secret
// and a ConfigMap need no pods), and the binaries.
var suiteInput = e2e.SuiteInput{
	Name:              "secrets",
	Upstream:          &controlplane.Options{Name: "secrets-up"},
	Downstreams:       3,
	DownstreamOptions: controlplane.Options{Name: "secrets-down", NoCRDs: true, StartTimeout: 3 * time.Minute},
	Binaries:          true,
	Manager:           &controllers.Options{ContentGrace: 5 * time.Second},
}

// sopsBinary is the sops CLI `make test` passes as FLEET_SOPS, else the one
// `make sops` caches.
func sopsBinary() string {
	if p := os.Getenv("FLEET_SOPS"); p != "" {
		return p
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		home, _ := os.UserHomeDir()
		cache = filepath.Join(home, ".cache")
	}
	return filepath.Join(cache, "gitfleet", "tools", "sops-v3.13.3", "sops")
}

func TestSecrets(t *testing.T) {
	RegisterFailHandler(Fail)
	ctx := context.Background()
	var s *e2e.Suite
	BeforeSuite(func() { s = e2e.SetUpSuite(ctx, suiteInput) })
	Describe("SOPS files opened only at the agents they were encrypted for", Ordered, func() {
		secrets.SOPSSpec(ctx, func() secrets.SOPSSpecInput {
			return secrets.SOPSSpecInput{Upstream: s.Upstream, Admin: s.Admin, Downstreams: s.Downstreams, LogDir: s.LogDir, SOPS: sopsBinary()}
		})
	})
	RunSpecs(t, "Secrets")
}
