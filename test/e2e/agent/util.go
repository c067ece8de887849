package agent

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

const ws = fleet.DefaultWorkspace

// registerTimeout bounds an agent's registration.
const registerTimeout = 90 * time.Second

// agentArgs are the flags of every agent here: quick check-ins and retries.
func agentArgs() []string {
	return []string{"--checkin-interval", "5s", "--min-backoff", "100ms", "--max-backoff", "2s", "--resync", "30s"}
}

// fixture is what the specs share. The clusters are allocated when the specs
// are built and joined in BeforeAll.
type fixture struct {
	ctx       context.Context
	admin     client.Client // manager cluster, admin
	upstream  *controlplane.ControlPlane
	dev, prod *cluster
}

// cluster is a downstream cluster joined through the CLI and the agent.
type cluster struct {
	*e2e.JoinedCluster
	ctx context.Context
	// link, when set, carries the agent's connections to the manager.
	link *framework.Proxy
}

// join registers a downstream cluster exactly as a user would: print the
// manifests with the CLI, apply them downstream, start the agent from them.
// The agent reaches the manager through link when it is set.
func (j *cluster) join(in SpecInput, cp *controlplane.ControlPlane, link *framework.Proxy, labels ...string) {
	GinkgoHelper()
	jin := e2e.JoinInput{Upstream: in.Upstream, Downstream: cp, Admin: in.Admin, LogDir: in.LogDir, AgentArgs: agentArgs()}
	for _, l := range labels {
		jin.ConfigArgs = append(jin.ConfigArgs, "-l", l)
	}
	if link != nil {
		jin.APIServerURL = link.URL
	}
	j.JoinedCluster = e2e.Join(j.ctx, jin, registerTimeout)
	j.link = link
}

// bd returns the cluster's BundleDeployment of a bundle (nil when none).
func (j *cluster) bd(bundle string) *fleet.BundleDeployment {
	bd := &fleet.BundleDeployment{}
	err := j.Admin.Get(j.ctx, types.NamespacedName{Namespace: j.Cred.ClusterNamespace, Name: bundle}, bd)
	if apierrors.IsNotFound(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	return bd
}

// waitState waits for the cluster's BundleDeployment of a bundle to be in
// state, with its deploymentID applied or failed.
func (j *cluster) waitState(bundle string, state fleet.BundleState, timeout time.Duration) *fleet.BundleDeployment {
	GinkgoHelper()
	var bd *fleet.BundleDeployment
	Eventually(func(g Gomega) {
		bd = j.bd(bundle)
		g.Expect(bd).NotTo(BeNil(), "no BundleDeployment %s for %s yet", bundle, j.Downstream.Name)
		g.Expect(summary.State(bd)).To(Equal(state), "BundleDeployment %s on %s: %s\nstatus: %+v\nagent log:\n%s",
			bundle, j.Downstream.Name, summary.Message(bd), bd.Status, j.Agent.Tail(6000))
	}, timeout, 250*time.Millisecond).Should(Succeed())
	return bd
}

// newBundle creates the Bundle name in the workspace with spec.
func (f *fixture) newBundle(name string, spec fleet.BundleSpec) {
	GinkgoHelper()
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ws}, Spec: spec}
	Expect(f.admin.Create(f.ctx, b)).To(Succeed())
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

func (f *fixture) bundleReady(name string) func(Gomega) {
	return func(g Gomega) {
		b := &fleet.Bundle{}
		g.Expect(f.admin.Get(f.ctx, types.NamespacedName{Namespace: ws, Name: name}, b)).To(Succeed())
		g.Expect(b.Status.Summary.DesiredReady).To(BeNumerically(">", 0))
		g.Expect(b.Status.Display.State).To(Equal(string(fleet.Ready)), "bundle %s: %+v", name, b.Status.Conditions)
	}
}

func selector(k, v string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchLabels: map[string]string{k: v}}
}

func target(k, v string) []fleet.BundleTarget {
	return []fleet.BundleTarget{{Name: k + "-" + v, ClusterSelector: selector(k, v)}}
}

func res(name, content string) fleet.BundleResource {
	return fleet.BundleResource{Name: name, Content: content}
}

func configMap(j *cluster, ns, name string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{}
	err := j.Local.Get(j.ctx, types.NamespacedName{Namespace: ns, Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	return cm
}

// restartUpstream stops the manager's kube-apiserver for down, then starts
// it again with the same address and certificates.
func (f *fixture) restartUpstream(down time.Duration) {
	start := time.Now()
	Expect(f.upstream.RestartAPIServer(down)).To(Succeed())
	GinkgoWriter.Printf("The manager's API server was down for %s\n", time.Since(start).Round(time.Second))
}
