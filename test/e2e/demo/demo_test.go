// Package demo_test runs the code path of `make demo` (devenv.Up) and checks
// it ends with every cluster (the manager's own, fleet-local/local, among
// them) and every bundle Ready, as read through the manager kubeconfig it
// prints.
package demo_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/registration"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
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
	g.Expect(clusters).To(HaveLen(3))
	var local []string
	for _, r := range clusters {
		g.Expect(r.Ready).To(BeTrue(), "cluster %+v", r)
		g.Expect(r.State).To(Equal("Ready"))
		if r.Workspace == fleet.LocalWorkspace {
			local = append(local, r.Name)
		}
	}
	g.Expect(local).To(ConsistOf(fleet.LocalClusterName), "the manager's own cluster, and only it, in fleet-local")
	g.Expect(bundles).To(HaveLen(4))
	for _, r := range bundles {
		g.Expect(r.Ready).To(BeTrue(), "bundle %+v", r)
		if r.Workspace == fleet.LocalWorkspace {
			// Fleet's quickstart: a GitRepo in fleet-local without targets
			// lands on the manager's own cluster, and only there.
			g.Expect(r.Name).To(Equal(devenv.LocalGitRepo + "-plain"))
			g.Expect(r.Clusters).To(Equal("1/1"))
			continue
		}
		g.Expect(r.Clusters).To(Equal("2/2"))
	}
	g.Expect(env.State.Ready).To(BeTrue())
	g.Expect(env.State.PIDs).To(HaveLen(10), "3 control planes x 2 processes, the manager, three agents")

	// The quickstart's objects are in the manager's own cluster, deployed by
	// the local agent: no other agent writes there.
	cm := &corev1.ConfigMap{}
	g.Expect(c.Get(ctx, types.NamespacedName{Namespace: "demo-plain", Name: "greeting"}, cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("message", "hello from fleet"))

	// The local agent holds an agent's credential for fleet-local/local,
	// as any other agent: it may not even list the Clusters beside its own.
	cred, err := registration.LoadStored(ctx, c, fleet.DefaultSystemNamespace)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cred).NotTo(BeNil())
	g.Expect(cred.Namespace + "/" + cred.ClusterName).To(Equal("fleet-local/local"))
	agent, err := client.New(cred.RESTConfig(), client.Options{Scheme: controllers.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	err = agent.List(ctx, &fleet.ClusterList{}, client.InNamespace(fleet.LocalWorkspace))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "listing Clusters with the local agent's credential: %v", err)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
