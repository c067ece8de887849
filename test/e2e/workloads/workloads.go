package workloads

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// SpecInput is what WorkloadsSpec runs against.
type SpecInput struct {
	// Upstream is the manager's control plane, the manager's controllers
	// running on it.
	Upstream *controlplane.ControlPlane
	// Downstreams are two control planes that run workloads (started with
	// controlplane.Options.Workloads, two simulated nodes or more each).
	Downstreams []*controlplane.ControlPlane
	// Admin is an admin client of Upstream, with the manager's scheme.
	Admin client.Client
	// LogDir receives the agents' logs.
	LogDir string
}

func (in SpecInput) validate() {
	Expect(in.Upstream).NotTo(BeNil(), "WorkloadsSpec: SpecInput.Upstream is required")
	Expect(in.Downstreams).To(HaveLen(2), "WorkloadsSpec: SpecInput.Downstreams needs two control planes")
	for _, cp := range in.Downstreams {
		Expect(cp.WorkloadProcesses()).NotTo(BeEmpty(), "WorkloadsSpec: %s runs no workloads (controlplane.Options.Workloads)", cp.Name)
	}
	Expect(in.Admin).NotTo(BeNil(), "WorkloadsSpec: SpecInput.Admin is required")
	Expect(in.LogDir).NotTo(BeEmpty(), "WorkloadsSpec: SpecInput.LogDir is required")
}

const ws = fleet.DefaultWorkspace

// fixture is what the specs share: two joined clusters, c0 and c1
// (labels name=c0 and name=c1, and workloads=true on both).
type fixture struct {
	ctx      context.Context
	admin    client.Client
	clusters []*cluster
}

// cluster is a downstream cluster joined through the CLI and the agent.
type cluster struct {
	*e2e.JoinedCluster
	ctx  context.Context
	name string
	cp   *controlplane.ControlPlane
}

// WorkloadsSpec joins the two downstream clusters and checks, against
// Kubernetes' own controllers, when the agent calls a release Ready, how a
// rollout across clusters waits for it, what waitForJobs does with a failing
// Job, and that a pod replaced by its ReplicaSet is no drift. The specs
// share the clusters: call it in an Ordered container.
func WorkloadsSpec(ctx context.Context, inputGetter func() SpecInput) {
	f := &fixture{ctx: ctx}
	BeforeAll(func() {
		in := inputGetter()
		in.validate()
		f.admin = in.Admin
		for i, cp := range in.Downstreams {
			name := fmt.Sprintf("c%d", i)
			j := e2e.Join(ctx, e2e.JoinInput{Upstream: in.Upstream, Downstream: cp, Admin: in.Admin, LogDir: in.LogDir,
				ConfigArgs: []string{"-l", "name=" + name, "-l", "workloads=true"},
				AgentArgs:  []string{"--checkin-interval", "5s", "--min-backoff", "100ms", "--max-backoff", "2s", "--resync", "30s"},
			}, 90*time.Second)
			f.clusters = append(f.clusters, &cluster{JoinedCluster: j, ctx: ctx, name: name, cp: cp})
		}
	})
	AfterAll(func() { // the agents span the specs
		for _, c := range f.clusters {
			c.StopAgents()
		}
	})
	It("runs Kubernetes' controllers with service-account tokens signed by the API server's key", func() { serviceAccounts(f) })
	It("shows a Deployment whose rollout stalls NotReady, with the deployment controller's reason", func() { stalledRollout(f) })
	It("holds maxUnavailable across clusters while their Deployments roll", func() { maxUnavailable(f) })
	It("fails a release whose Job fails when waitForJobs is set, and deploys it once the Job completes", func() { failingJob(f) })
	It("does not take a Pod deleted and replaced by its ReplicaSet for drift", func() { deletedPod(f) })
	It("copies downstreamResources sealed to each cluster's agent, follows their source, and removes them when un-targeted", func() { downstreamResources(f) })
	It("deploys a HelmOp's chart reading its downstreamResources, follows their source, and removes or keeps them when un-targeted", func() { downstreamHelmOp(f) })
	It("deploys a GitRepo's chart whose fleet.yaml names downstreamResources, follows their source, and removes or keeps them when un-targeted", func() { downstreamGitRepo(f) })
}

// deployment is a Deployment's manifest; spec holds extra lines of its
// spec, indented by two spaces.
func deployment(name, image string, replicas int, spec ...string) string {
	return fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata:
  name: %[1]s
spec:
  replicas: %[3]d
%[4]s  selector:
    matchLabels: {app: %[1]s}
  template:
    metadata:
      labels: {app: %[1]s}
    spec:
      containers:
      - name: app
        image: %[2]s
`, name, image, replicas, strings.Join(spec, ""))
}

func res(name, content string) fleet.BundleResource {
	return fleet.BundleResource{Name: name, Content: content}
}

func targetName(name string) []fleet.BundleTarget {
	return []fleet.BundleTarget{{Name: name, ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"name": name}}}}
}

func targetAll() []fleet.BundleTarget {
	return []fleet.BundleTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"workloads": "true"}}}}
}

func (f *fixture) newBundle(name string, spec fleet.BundleSpec) {
	GinkgoHelper()
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ws}, Spec: spec}
	Expect(f.admin.Create(f.ctx, b)).To(Succeed())
	DeferCleanup(func() { // the next spec starts without this bundle's workloads
		Expect(client.IgnoreNotFound(f.admin.Delete(f.ctx, b))).To(Succeed())
	})
}

// updateBundle changes a Bundle, retrying on conflicts.
func (f *fixture) updateBundle(name string, change func(*fleet.Bundle)) {
	GinkgoHelper()
	Eventually(func() error {
		b := &fleet.Bundle{}
		if err := f.admin.Get(f.ctx, types.NamespacedName{Namespace: ws, Name: name}, b); err != nil {
			return err
		}
		change(b)
		return f.admin.Update(f.ctx, b)
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
}

// setResource replaces the content of one of a Bundle's resources.
func (f *fixture) setResource(bundle, resource, content string) {
	GinkgoHelper()
	f.updateBundle(bundle, func(b *fleet.Bundle) {
		for i := range b.Spec.Resources {
			if b.Spec.Resources[i].Name == resource {
				b.Spec.Resources[i].Content = content
				return
			}
		}
		Fail(fmt.Sprintf("bundle %s has no resource %s", bundle, resource))
	})
}

// bd returns the cluster's BundleDeployment of a bundle (nil when none).
func (c *cluster) bd(bundle string) *fleet.BundleDeployment {
	GinkgoHelper()
	bd := &fleet.BundleDeployment{}
	err := c.Admin.Get(c.ctx, types.NamespacedName{Namespace: c.Cred.ClusterNamespace, Name: bundle}, bd)
	if apierrors.IsNotFound(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	return bd
}

// waitState waits for the cluster's BundleDeployment of a bundle to be in
// state for its current deploymentID, and returns it.
func (c *cluster) waitState(bundle string, state fleet.BundleState, timeout time.Duration) *fleet.BundleDeployment {
	GinkgoHelper()
	var bd *fleet.BundleDeployment
	e2e.WaitFor(fmt.Sprintf("BundleDeployment %s on %s to be %s", bundle, c.name, state), func(g Gomega) {
		bd = c.bd(bundle)
		g.Expect(bd).NotTo(BeNil(), "no BundleDeployment %s for %s yet", bundle, c.name)
		g.Expect(summary.State(bd)).To(Equal(state), "BundleDeployment %s on %s: %s\nstatus: %+v\nagent log:\n%s",
			bundle, c.name, summary.Message(bd), bd.Status, c.Agent.Tail(4000))
	}, timeout, 250*time.Millisecond)
	return bd
}

// deployment reads a Deployment downstream.
func (c *cluster) deployment(ns, name string) *appsv1.Deployment {
	GinkgoHelper()
	d := &appsv1.Deployment{}
	Expect(c.Local.Get(c.ctx, types.NamespacedName{Namespace: ns, Name: name}, d)).To(Succeed())
	return d
}

// pods lists the pods of an app downstream.
func (c *cluster) pods(ns, app string) []corev1.Pod {
	GinkgoHelper()
	pods := &corev1.PodList{}
	Expect(c.Local.List(c.ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": app})).To(Succeed())
	return pods.Items
}

// rolling tells whether the deployment controller is rolling a Deployment
// out: not every replica is updated and available, or old ones remain.
func rolling(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	s := d.Status
	return s.ObservedGeneration < d.Generation || s.UpdatedReplicas < want || s.AvailableReplicas < want || s.Replicas > s.UpdatedReplicas
}

// runningOnSimulatedNodes checks that pods were scheduled on the simulated
// nodes and run there: what kube-scheduler and kwok do, not the test.
func runningOnSimulatedNodes(g Gomega, pods []corev1.Pod, n int) {
	g.Expect(pods).To(HaveLen(n))
	for _, p := range pods {
		g.Expect(p.Spec.NodeName).To(HavePrefix("kwok-node-"), "pod %s is bound to a simulated node by the scheduler", p.Name)
		g.Expect(p.Status.Phase).To(Equal(corev1.PodRunning), "pod %s", p.Name)
	}
}
