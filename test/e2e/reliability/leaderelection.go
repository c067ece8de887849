package reliability_test

import (
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

func startManager(name string, extra ...string) *framework.Process {
	args := append([]string{"--kubeconfig", cp.Kubeconfig, "--api-server-url", cp.Config.Host,
		"--webhook-bind-address", "", "--leader-elect", "--leader-elect-lease-duration", lease.String()}, extra...)
	p, err := framework.Start(logDir, name, "fleet-manager", args...)
	Expect(err).NotTo(HaveOccurred())
	managers = append(managers, p) // stopped after the suite: they span specs
	return p
}

// isLeader tells whether p acquired the lease and still runs (a replica that
// loses its lease exits).
func isLeader(p *framework.Process) bool {
	return !p.Exited() && strings.Contains(strings.ToLower(p.Output()), "successfully acquired lease")
}

func clustersIn(ns string, n int, labels map[string]string) {
	Expect(admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	for i := range n {
		Expect(admin.Create(ctx, &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{
			Name: fmt.Sprintf("c-%03d", i), Namespace: ns, Labels: labels}})).To(Succeed())
	}
}

func bundle(ns, name string) *fleet.Bundle {
	b := &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: fleet.BundleSpec{
			Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\n"}},
			Targets:   []fleet.BundleTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{}}},
		},
	}
	Expect(admin.Create(ctx, b)).To(Succeed())
	return b
}

func bundleDeployments(ns string) []fleet.BundleDeployment {
	list := &fleet.BundleDeploymentList{}
	Expect(admin.List(ctx, list, client.MatchingLabels{fleet.ClusterNamespaceLabel: ns})).To(Succeed())
	return list.Items
}

var _ = Describe("Leader election", Ordered, func() {
	const ns = "le"
	var a, b *framework.Process

	BeforeAll(func() { clustersIn(ns, 3, nil) })
	AfterAll(func() { // the next specs run managers of their own
		for _, m := range managers {
			m.Stop()
		}
	})

	It("runs one leader that works while the other replica waits", func() {
		a, b = startManager("manager-a"), startManager("manager-b")
		Eventually(func() int {
			n := 0
			for _, p := range []*framework.Process{a, b} {
				if isLeader(p) {
					n++
				}
			}
			return n
		}, 30*time.Second, 100*time.Millisecond).Should(Equal(1))
		Consistently(func() bool { return isLeader(a) && isLeader(b) }, 2*lease, 200*time.Millisecond).Should(BeFalse())
		bundle(ns, "one")
		Eventually(func() []fleet.BundleDeployment { return bundleDeployments(ns) }, 30*time.Second, 100*time.Millisecond).Should(HaveLen(3))
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

		bundle(ns, "two")
		Eventually(func() []fleet.BundleDeployment { return bundleDeployments(ns) }, 30*time.Second, 100*time.Millisecond).Should(HaveLen(6))

		By("a graceful stop releases the lease at once")
		a2 := startManager("manager-c")
		time.Sleep(time.Second)
		start := time.Now()
		standby.Stop() // SIGTERM
		Expect(standby.Exited()).To(BeTrue())
		Eventually(func() bool { return isLeader(a2) }, 3*lease, 50*time.Millisecond).Should(BeTrue())
		GinkgoWriter.Printf("After a graceful stop the new leader took over in %s\n", time.Since(start))
		Expect(time.Since(start)).To(BeNumerically("<", lease+2*time.Second))
	})
})

var _ = Describe("Manager killed during a fan-out", func() {
	It("converges after a restart with no duplicate or orphaned BundleDeployments", func() {
		const ns, clusters, bundles = "fanout", 50, 10
		clustersIn(ns, clusters, map[string]string{"x": "y"})
		m := startManager("fanout-1")
		DeferCleanup(m.Stop) // this spec's managers end with it, releasing the lease
		Eventually(func() int {
			list := &corev1.NamespaceList{}
			Expect(admin.List(ctx, list, client.MatchingLabels{fleet.ClusterNamespaceLabel: ns})).To(Succeed())
			return len(list.Items)
		}, time.Minute, 100*time.Millisecond).Should(Equal(clusters))
		for i := range bundles {
			bundle(ns, fmt.Sprintf("b-%d", i))
		}
		Eventually(func() int { return len(bundleDeployments(ns)) }, time.Minute, 20*time.Millisecond).Should(BeNumerically(">=", 100))
		m.Kill()
		killedAt := len(bundleDeployments(ns))
		GinkgoWriter.Printf("Killed the manager with %d of %d BundleDeployments written\n", killedAt, clusters*bundles)

		DeferCleanup(startManager("fanout-2").Stop)
		Eventually(func() int { return len(bundleDeployments(ns)) }, 2*time.Minute, 100*time.Millisecond).Should(Equal(clusters * bundles))
		Consistently(func() int { return len(bundleDeployments(ns)) }, 3*time.Second, 200*time.Millisecond).Should(Equal(clusters * bundles))
		seen := map[string]bool{}
		for _, bd := range bundleDeployments(ns) {
			key := bd.Namespace + "/" + bd.Name
			Expect(seen[key]).To(BeFalse(), "duplicate %s", key)
			seen[key] = true
			Expect(bd.Namespace).To(Equal(names.ClusterNamespace(ns, bd.Labels[fleet.ClusterLabel])))
			Expect(bd.Spec.DeploymentID).To(HavePrefix(bd.Labels[fleet.ContentNameLabel] + ":"))
			b := &fleet.Bundle{}
			Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: bd.Labels[fleet.BundleNameLabel]}, b)).To(Succeed(), "orphan %s", key)
		}
	})
})
