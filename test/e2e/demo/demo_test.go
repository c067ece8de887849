// Package demo_test runs the code path of `make demo` (devenv.Up) and checks
// it ends with both clusters and every example bundle Ready, as read through
// the manager kubeconfig it prints.
package demo_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/devenv"
	"github.com/gitfleet/fleet/internal/kubeconfig"
	"github.com/gitfleet/fleet/test/framework"
)

func TestDemo(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	bin, err := framework.Binaries()
	g.Expect(err).NotTo(HaveOccurred())
	defer framework.RemoveBinaries()
	// Kept when the test fails, for its logs.
	dir, err := os.MkdirTemp("", "fleet-demo-test-")
	g.Expect(err).NotTo(HaveOccurred())
	defer func() {
		if !t.Failed() {
			_ = os.RemoveAll(dir)
		}
	}()
	start := time.Now()
	env, err := devenv.Up(ctx, devenv.Options{
		Dir: dir, Bin: bin, Examples: filepath.Join(framework.RepoRoot(), "config", "examples"), Progress: testWriter{t},
	})
	g.Expect(err).NotTo(HaveOccurred(), "logs in %s", filepath.Join(dir, "logs"))
	defer env.Down()
	t.Logf("Up in %s", time.Since(start).Round(time.Second))

	// What `kubectl --kubeconfig <printed path> get clusters,bundles -A` sees.
	raw, err := os.ReadFile(env.State.Kubeconfigs["manager"])
	g.Expect(err).NotTo(HaveOccurred())
	cfg, err := kubeconfig.ToREST(raw)
	g.Expect(err).NotTo(HaveOccurred())
	c, err := client.New(cfg, client.Options{Scheme: controllers.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	clusters, bundles, err := devenv.ReadStatus(ctx, c)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(clusters).To(HaveLen(2))
	for _, r := range clusters {
		g.Expect(r.Ready).To(BeTrue(), "cluster %+v", r)
		g.Expect(r.State).To(Equal("Ready"))
	}
	g.Expect(bundles).To(HaveLen(3))
	for _, r := range bundles {
		g.Expect(r.Ready).To(BeTrue(), "bundle %+v", r)
		g.Expect(r.Clusters).To(Equal("2/2"))
	}
	g.Expect(env.State.Ready).To(BeTrue())
	g.Expect(env.State.PIDs).To(HaveLen(9), "3 control planes x 2 processes, the manager, two agents")
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
