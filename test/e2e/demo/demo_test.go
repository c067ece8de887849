// Package demo_test runs the code path of `make demo` (devenv.Up) and checks
// it ends with every cluster (the manager's own, fleet-local/local, among
// them) and every bundle Ready, as read through the manager kubeconfig it
// prints.
package demo_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/upstream"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/devenv"
	"github.com/gitfleet/fleet/internal/kubeconfig"
	"github.com/gitfleet/fleet/internal/names"
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
		Workloads: true,
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
			// As Fleet counts: every BundleDeployment of the cluster, its
			// agent Bundle's among them; the quickstart's two and the agent's.
			g.Expect(r.Bundles).To(Equal("3/3"), "local cluster %+v", r)
		}
	}
	g.Expect(local).To(ConsistOf(fleet.LocalClusterName), "the manager's own cluster, and only it, in fleet-local")
	g.Expect(bundles).To(HaveLen(9), "plain, helm, kustomize, workloads, the quickstart's plain and workloads, "+
		"and an agent Bundle per cluster, as an install keeps")
	var localBundles, agentBundles []string
	for _, r := range bundles {
		g.Expect(r.Ready).To(BeTrue(), "bundle %+v", r)
		switch {
		case strings.HasPrefix(r.Name, names.AgentBundlePrefix):
			// One cluster each; the agent deployed its own Deployment,
			// which ran on a simulated node and rolled out.
			agentBundles = append(agentBundles, r.Workspace+"/"+r.Name)
			g.Expect(r.Clusters).To(Equal("1/1"))
		case r.Workspace == fleet.LocalWorkspace:
			// Fleet's quickstart: a GitRepo in fleet-local without targets
			// lands on the manager's own cluster, and only there.
			localBundles = append(localBundles, r.Name)
			g.Expect(r.Clusters).To(Equal("1/1"))
		default:
			g.Expect(r.Clusters).To(Equal("2/2"))
		}
	}
	g.Expect(localBundles).To(ConsistOf(devenv.LocalGitRepo+"-plain", devenv.LocalGitRepo+"-"+devenv.WorkloadsDir))
	g.Expect(agentBundles).To(HaveLen(3))
	g.Expect(agentBundles).To(ContainElement(fleet.LocalWorkspace + "/" + names.AgentBundle(fleet.LocalClusterName)))
	g.Expect(env.State.Ready).To(BeTrue())
	g.Expect(env.State.PIDs).To(HaveLen(20), "3 control planes x 2 processes, the manager, three agents, "+
		"kube-controller-manager, kube-scheduler and kwok for each cluster, and the dashboard")
	g.Expect(env.State.Workloads).To(HaveLen(9))

	// The dashboard the demo prints opens, logged in by its URL, and lists
	// the clusters.
	g.Expect(env.State.DashboardURL).To(HavePrefix("http://127.0.0.1:"))
	jar, err := cookiejar.New(nil)
	g.Expect(err).NotTo(HaveOccurred())
	browser := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, err := browser.Get(env.State.DashboardURL)
	g.Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	resp, err = browser.Get(strings.SplitN(env.State.DashboardURL, "/login", 2)[0] + "/clusters")
	g.Expect(err).NotTo(HaveOccurred())
	page, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(resp.StatusCode).To(Equal(http.StatusOK))
	g.Expect(string(page)).To(ContainSubstring(fleet.LocalClusterName))

	// The workloads example ran on every cluster, the manager's own (through
	// the quickstart in fleet-local) among them: Kubernetes' controllers made
	// the Deployment available on simulated nodes and the Job complete, and
	// only then was the release Ready (waitForJobs).
	for _, name := range []string{"manager", "edge-1", "capi-1"} {
		raw, err := os.ReadFile(env.State.Kubeconfigs[name])
		g.Expect(err).NotTo(HaveOccurred())
		cfg, err := kubeconfig.ToREST(raw)
		g.Expect(err).NotTo(HaveOccurred())
		down, err := client.New(cfg, client.Options{})
		g.Expect(err).NotTo(HaveOccurred())
		d := &appsv1.Deployment{}
		g.Expect(down.Get(ctx, types.NamespacedName{Namespace: "demo-workloads", Name: "web"}, d)).To(Succeed())
		g.Expect(d.Status.AvailableReplicas).To(Equal(int32(2)), "%s: %+v", name, d.Status)
		pods := &corev1.PodList{}
		g.Expect(down.List(ctx, pods, client.InNamespace("demo-workloads"), client.MatchingLabels{"app": "web"})).To(Succeed())
		g.Expect(pods.Items).To(HaveLen(2))
		for _, p := range pods.Items {
			g.Expect(p.Spec.NodeName).To(HavePrefix("kwok-node-"), "%s: scheduled by kube-scheduler", name)
			g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning))
		}
		// The agent's own Deployment, which its agent Bundle adopted (Helm
		// manages it now), rolled out on a simulated node: in the manager's
		// cluster as in the others, run by the ServiceAccount an install makes.
		agentDep := &appsv1.Deployment{}
		g.Expect(down.Get(ctx, types.NamespacedName{Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentName}, agentDep)).To(Succeed())
		g.Expect(agentDep.Labels).To(HaveKeyWithValue("app.kubernetes.io/managed-by", "Helm"), "%s: the agent Bundle's release holds it", name)
		g.Expect(agentDep.Status.AvailableReplicas).To(BeNumerically(">=", 1), "%s: %+v", name, agentDep.Status)
		job := &batchv1.Job{}
		g.Expect(down.Get(ctx, types.NamespacedName{Namespace: "demo-workloads", Name: "web-migrate-1"}, job)).To(Succeed())
		g.Expect(job.Status.Succeeded).To(Equal(int32(1)), "%s: %+v", name, job.Status)
	}
	usage, err := devenv.MeasureWorkloads(ctx, env.State.Workloads, 5*time.Second)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(usage).To(HaveLen(9))
	var table strings.Builder
	g.Expect(devenv.PrintUsage(&table, usage, 5*time.Second)).To(Succeed())
	t.Logf("What runs the workloads:\n%s", table.String())

	// The quickstart's objects are in the manager's own cluster, deployed by
	// the local agent: no other agent writes there.
	cm := &corev1.ConfigMap{}
	g.Expect(c.Get(ctx, types.NamespacedName{Namespace: "demo-plain", Name: "greeting"}, cm)).To(Succeed())
	g.Expect(cm.Data).To(HaveKeyWithValue("message", "hello from fleet"))

	// The local agent holds an agent's credential for fleet-local/local,
	// as any other agent: it may not even list the Clusters beside its own.
	cred, err := upstream.LoadStored(ctx, c, fleet.DefaultSystemNamespace)
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
