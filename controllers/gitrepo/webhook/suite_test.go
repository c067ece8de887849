package webhook_test

import (
	"context"
	"net/http/httptest"
	"os"
	"testing"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/gitfleet/fleet/controllers/gitrepo/webhook"
	"github.com/gitfleet/fleet/test/envtest"
)

var (
	ctx        = context.Background()
	env        *envtest.Environment
	webhookURL string
)

// TestMain runs this package's tests against one control plane, with the
// webhook handler served on loopback as the manager serves it, reading
// GitRepos through the manager's cache. No GitRepo controller runs: what
// the handler does is write status.webhookCommit, and that is what the
// tests look at (the GitRepo controller's tests show it polls when that
// field changes).
func TestMain(m *testing.M) {
	os.Exit(run(m))
}

func run(m *testing.M) int {
	var srv *httptest.Server
	defer func() {
		if srv != nil {
			srv.Close()
		}
	}()
	return envtest.Run(ctx, envtest.RunInput{
		M:    m,
		Name: "webhook",
		SetupReconcilers: func(_ context.Context, mgr ctrl.Manager) error {
			srv = httptest.NewServer(webhook.NewHandler(mgr.GetClient(), webhook.Options{SecretReader: mgr.GetAPIReader()}))
			webhookURL = srv.URL
			return nil
		},
		SetupEnv: func(e *envtest.Environment) { env = e },
	})
}
