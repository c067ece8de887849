package reliability

import (
	"context"
	"fmt"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/test/framework"
)

// lease is short for a quick test, yet long enough that a leader on a loaded
// CI machine renews in time (renew deadline = 2/3 of it).
const lease = 6 * time.Second

// startReplica starts a fleet-manager replica with leader election and
// returns once it is ready: its cache has synced, which every replica does,
// leading or not.
func startReplica(in SpecInput, name string, extra ...string) *framework.Process {
	GinkgoHelper()
	args := append([]string{"--kubeconfig", in.ControlPlane.Kubeconfig, "--api-server-url", in.ControlPlane.Config.Host,
		"--webhook-bind-address", "", "--leader-elect", "--leader-elect-lease-duration", lease.String()}, extra...)
	p, err := framework.StartManagerProcess(in.LogDir, name, args...)
	Expect(err).NotTo(HaveOccurred())
	return p
}

// isLeader tells whether p acquired the lease and still runs (a replica that
// loses its lease exits).
func isLeader(p *framework.Process) bool {
	return !p.Exited() && strings.Contains(strings.ToLower(p.Output()), "successfully acquired lease")
}

// isCandidate tells whether p tries to acquire the lease.
func isCandidate(p *framework.Process) bool {
	return !p.Exited() && strings.Contains(strings.ToLower(p.Output()), "attempting to acquire leader lease")
}

func clustersIn(ctx context.Context, admin client.Client, ns string, n int, labels map[string]string) {
	GinkgoHelper()
	Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	for i := range n {
		Expect(admin.Create(ctx, &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("c-%03d", i), Namespace: ns, Labels: labels}})).To(Succeed())
	}
}

// createBundle creates a Bundle of one ConfigMap that targets every Cluster.
func createBundle(ctx context.Context, admin client.Client, ns, name string) {
	GinkgoHelper()
	b := &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: fleet.BundleSpec{
			Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\n"}},
			Targets:   []fleet.BundleTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{}}},
		},
	}
	Expect(admin.Create(ctx, b)).To(Succeed())
}

func bundleDeployments(ctx context.Context, admin client.Client, ns string) []fleet.BundleDeployment {
	GinkgoHelper()
	list := &fleet.BundleDeploymentList{}
	Expect(admin.List(ctx, list, client.MatchingLabels{fleet.ClusterNamespaceLabel: ns})).To(Succeed())
	return list.Items
}

// LeaderElectionSpec runs two fleet-manager replicas with leader election:
// one works while the other waits, the standby takes over within the lease
// time when the leader is killed, and at once when the leader stops
// gracefully. Call it in an Ordered container.
func LeaderElectionSpec(ctx context.Context, inputGetter func() SpecInput) {
	const ns = "le"
	var (
		input   SpecInput
		a, b    *framework.Process
		started []*framework.Process
	)
	start := func(name string) *framework.Process {
		GinkgoHelper()
		p := startReplica(input, name)
		started = append(started, p) // they span specs: stopped after the last
		return p
	}
	bds := func() []fleet.BundleDeployment { return bundleDeployments(ctx, input.Admin, ns) }

	BeforeAll(func() {
		input = inputGetter()
		input.validate("LeaderElectionSpec")
		clustersIn(ctx, input.Admin, ns, 3, nil)
	})
	AfterAll(func() { // other specs run managers of their own
		for _, m := range started {
			m.Stop()
		}
	})

	It("runs one leader that works while the other replica waits", func() {
		a, b = start("manager-a"), start("manager-b")
		Eventually(func() int {
			n := 0
			for _, p := range []*framework.Process{a, b} {
				if isLeader(p) {
					n++
				}
			}
			return n
		}, 30*time.Second, 100*time.Millisecond).Should(Equal(1), "one replica acquires the lease")
		Consistently(func() bool { return isLeader(a) && isLeader(b) }, 2*lease, 200*time.Millisecond).Should(BeFalse())
		createBundle(ctx, input.Admin, ns, "one")
		Eventually(bds, 30*time.Second, 100*time.Millisecond).Should(HaveLen(3), "the leader fans the bundle out")
	})

	It("fails over within the lease time when the leader dies", func() {
		leader, standby := a, b
		if isLeader(b) {
			leader, standby = b, a
		}
		Expect(isLeader(leader)).To(BeTrue(), "one replica leads:\n%s", leader.Output())
		Expect(standby.Exited()).To(BeFalse(), "the standby runs:\n%s", standby.Output())
		leader.Kill()
		killed := time.Now()
		Eventually(func() bool { return isLeader(standby) }, 3*lease, 50*time.Millisecond).Should(BeTrue(),
			func() string { return "the standby did not take over:\n" + standby.Output() })
		took := time.Since(killed)
		AddReportEntry("failover", took.String())
		GinkgoWriter.Printf("Standby took over %s after the leader was killed (lease %s)\n", took, lease)
		Expect(took).To(BeNumerically("<", 2*lease), "the standby takes over within the lease time, plus its retry period")

		createBundle(ctx, input.Admin, ns, "two")
		Eventually(bds, 30*time.Second, 100*time.Millisecond).Should(HaveLen(6), "the new leader fans the bundle out")

		By("a graceful stop releases the lease at once")
		next := start("manager-c")
		Eventually(func() bool { return isCandidate(next) }, 30*time.Second, 50*time.Millisecond).Should(BeTrue(),
			func() string { return "manager-c did not try to acquire the lease:\n" + next.Tail(4000) })
		stopped := time.Now()
		standby.Stop() // SIGTERM
		Expect(standby.Exited()).To(BeTrue())
		Eventually(func() bool { return isLeader(next) }, 3*lease, 50*time.Millisecond).Should(BeTrue(),
			func() string { return "manager-c did not take over:\n" + next.Tail(4000) })
		GinkgoWriter.Printf("After a graceful stop the new leader took over in %s\n", time.Since(stopped))
		Expect(time.Since(stopped)).To(BeNumerically("<", lease+2*time.Second))
	})
}

// FanOutKillSpec kills the manager while it writes BundleDeployments for
// many clusters, starts another, and checks that the fan-out completes with
// no BundleDeployment missing, duplicated or orphaned.
func FanOutKillSpec(ctx context.Context, inputGetter func() SpecInput) {
	var input SpecInput
	BeforeEach(func() {
		input = inputGetter()
		input.validate("FanOutKillSpec")
	})

	It("converges after a restart with no duplicate or orphaned BundleDeployments", func() {
		const ns, clusters, bundles = "fanout", 50, 10
		admin := input.Admin
		bds := func() []fleet.BundleDeployment { return bundleDeployments(ctx, admin, ns) }
		clustersIn(ctx, admin, ns, clusters, map[string]string{"x": "y"})
		m := startReplica(input, "fanout-1")
		DeferCleanup(m.Stop) // this spec's managers end with it, releasing the lease
		Eventually(func() int {
			list := &corev1.NamespaceList{}
			Expect(admin.List(ctx, list, client.MatchingLabels{fleet.ClusterNamespaceLabel: ns})).To(Succeed())
			return len(list.Items)
		}, time.Minute, 100*time.Millisecond).Should(Equal(clusters), "the manager creates every cluster's namespace")
		for i := range bundles {
			createBundle(ctx, admin, ns, fmt.Sprintf("b-%d", i))
		}
		Eventually(func() int { return len(bds()) }, time.Minute, 20*time.Millisecond).Should(BeNumerically(">=", 100),
			"the fan-out is under way")
		m.Kill()
		killedAt := len(bds())
		GinkgoWriter.Printf("Killed the manager with %d of %d BundleDeployments written\n", killedAt, clusters*bundles)

		DeferCleanup(startReplica(input, "fanout-2").Stop)
		Eventually(func() int { return len(bds()) }, 2*time.Minute, 100*time.Millisecond).Should(Equal(clusters*bundles),
			"the restarted manager completes the fan-out")
		Consistently(func() int { return len(bds()) }, 3*time.Second, 200*time.Millisecond).Should(Equal(clusters * bundles))
		seen := map[string]bool{}
		for _, bd := range bds() {
			key := bd.Namespace + "/" + bd.Name
			Expect(seen[key]).To(BeFalse(), "duplicate %s", key)
			seen[key] = true
			Expect(bd.Namespace).To(Equal(names.ClusterNamespace(ns, bd.Labels[fleet.ClusterLabel])))
			Expect(bd.Spec.DeploymentID).To(HavePrefix(bd.Labels[fleet.ContentNameLabel] + ":"))
			b := &fleet.Bundle{}
			Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: bd.Labels[fleet.BundleNameLabel]}, b)).To(Succeed(), "orphan %s", key)
		}
	})
}
