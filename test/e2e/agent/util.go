package agent_test

import (
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/registration"
	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework"
)

const ws = fleet.DefaultWorkspace

// joined is a downstream cluster registered through the CLI and the agent.
type joined struct {
	cp      *controlplane.ControlPlane
	local   client.Client
	agent   *framework.Process
	cluster *fleet.Cluster
	cred    *registration.Credential
	starts  int
	// link, when set, carries the agent's connections to the manager.
	link *framework.Proxy
}

// join registers a downstream cluster exactly as a user would: print the
// manifests with the CLI, apply them downstream, start the agent from them.
func join(cp *controlplane.ControlPlane, labels ...string) *joined {
	return joinVia(cp, nil, labels...)
}

// joinVia joins a cluster whose agent reaches the manager through link.
func joinVia(cp *controlplane.ControlPlane, link *framework.Proxy, labels ...string) *joined {
	j := &joined{cp: cp, link: link}
	var err error
	j.local, err = cp.Client(registration.Scheme())
	Expect(err).NotTo(HaveOccurred())
	j.applyToken()
	args := []string{"install", "agent-config"}
	for _, l := range labels {
		args = append(args, "-l", l)
	}
	configYAML, err := framework.Run("fleet", args...)
	Expect(err).NotTo(HaveOccurred())
	Expect(framework.ApplyYAML(ctx, j.local, configYAML)).To(Succeed())
	j.start()
	j.waitRegistered()
	return j
}

// applyToken applies a fresh registration token downstream, as printed by
// `fleet install agent-token`.
func (j *joined) applyToken() {
	tokenYAML, err := framework.Run("fleet", "install", "agent-token", "-k", upstream.Kubeconfig)
	Expect(err).NotTo(HaveOccurred())
	Expect(framework.ApplyYAML(ctx, j.local, tokenYAML)).To(Succeed())
	if j.link == nil {
		return
	}
	boot := &corev1.Secret{}
	key := types.NamespacedName{Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentBootstrapSecretName}
	Expect(j.local.Get(ctx, key, boot)).To(Succeed())
	boot.Data[agentinstall.BootstrapAPIServerURLKey] = []byte(j.link.URL)
	Expect(j.local.Update(ctx, boot)).To(Succeed())
}

func (j *joined) start() {
	j.agent = j.startReplica()
}

// startReplica starts one more agent process for the cluster.
func (j *joined) startReplica(extra ...string) *framework.Process {
	j.starts++
	args := append([]string{"--kubeconfig", j.cp.Kubeconfig, "--checkin-interval", "5s",
		"--min-backoff", "100ms", "--max-backoff", "2s", "--resync", "30s"}, extra...)
	p, err := framework.Start(logDir, fmt.Sprintf("agent-%s-%d", j.cp.Name, j.starts), "fleet-agent", args...)
	Expect(err).NotTo(HaveOccurred())
	agents = append(agents, p)
	return p
}

func (j *joined) waitRegistered() {
	Eventually(func(g Gomega) {
		cred, err := registration.LoadStored(ctx, j.local, fleet.DefaultSystemNamespace)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(cred).NotTo(BeNil(), "no credential stored yet; agent log:\n%s", j.agent.Tail(6000))
		j.cred = cred
	}, 90*time.Second, 200*time.Millisecond).Should(Succeed())
	j.cluster = &fleet.Cluster{}
	Expect(admin.Get(ctx, types.NamespacedName{Namespace: j.cred.Namespace, Name: j.cred.ClusterName}, j.cluster)).To(Succeed())
}

// bd returns the cluster's BundleDeployment of a bundle (nil when none).
func (j *joined) bd(bundle string) *fleet.BundleDeployment {
	bd := &fleet.BundleDeployment{}
	err := admin.Get(ctx, types.NamespacedName{Namespace: j.cred.ClusterNamespace, Name: bundle}, bd)
	if apierrors.IsNotFound(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	return bd
}

// waitState waits for the cluster's BundleDeployment of a bundle to be in
// state, with its deploymentID applied or failed.
func (j *joined) waitState(bundle string, state fleet.BundleState, timeout time.Duration) *fleet.BundleDeployment {
	GinkgoHelper()
	var bd *fleet.BundleDeployment
	Eventually(func(g Gomega) {
		bd = j.bd(bundle)
		g.Expect(bd).NotTo(BeNil(), "no BundleDeployment %s for %s yet", bundle, j.cp.Name)
		g.Expect(summary.State(bd)).To(Equal(state), "BundleDeployment %s on %s: %s\nstatus: %+v\nagent log:\n%s",
			bundle, j.cp.Name, summary.Message(bd), bd.Status, j.agent.Tail(6000))
	}, timeout, 250*time.Millisecond).Should(Succeed())
	return bd
}

func newBundle(name string, spec fleet.BundleSpec) *fleet.Bundle {
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ws}, Spec: spec}
	Expect(admin.Create(ctx, b)).To(Succeed())
	return b
}

// updateBundle changes a Bundle, retrying on conflicts.
func updateBundle(name string, change func(*fleet.Bundle)) {
	GinkgoHelper()
	Eventually(func() error {
		b := &fleet.Bundle{}
		if err := admin.Get(ctx, types.NamespacedName{Namespace: ws, Name: name}, b); err != nil {
			return err
		}
		change(b)
		return admin.Update(ctx, b)
	}, 30*time.Second, 200*time.Millisecond).Should(Succeed())
}

func bundleReady(name string) func(Gomega) {
	return func(g Gomega) {
		b := &fleet.Bundle{}
		g.Expect(admin.Get(ctx, types.NamespacedName{Namespace: ws, Name: name}, b)).To(Succeed())
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

func configMap(j *joined, ns, name string) *corev1.ConfigMap {
	cm := &corev1.ConfigMap{}
	err := j.local.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	return cm
}

// restartUpstream stops the manager's kube-apiserver for down, then starts
// it again with the same address and certificates.
func restartUpstream(down time.Duration) {
	start := time.Now()
	Expect(upstream.RestartAPIServer(down)).To(Succeed())
	GinkgoWriter.Printf("The manager's API server was down for %s\n", time.Since(start).Round(time.Second))
}

func contains(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
