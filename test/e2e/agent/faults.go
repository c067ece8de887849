package agent

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agent/upstream"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/test/framework"
)

const slowStatefulSet = `apiVersion: apps/v1
kind: StatefulSet
metadata: {name: db}
spec:
  replicas: 1
  serviceName: db
  selector: {matchLabels: {app: db}}
  template:
    metadata: {labels: {app: db}}
    spec:
      containers:
      - {name: db, image: postgres:16}
`

// releaseStatuses lists the status labels of a release's Helm records.
func releaseStatuses(j *cluster, ns, name string) []string {
	list := &corev1.SecretList{}
	Expect(j.Local.List(j.ctx, list, client.InNamespace(ns), client.MatchingLabels{"owner": "helm", "name": name})).To(Succeed())
	out := make([]string, 0, len(list.Items))
	for _, s := range list.Items {
		out = append(out, s.Labels["version"]+":"+s.Labels["status"])
	}
	sort.Strings(out)
	return out
}

// markStatefulSetReady does what the controllers and kubelets would.
func markStatefulSetReady(j *cluster, ns, name string) error {
	s := &appsv1.StatefulSet{}
	if err := j.Local.Get(j.ctx, types.NamespacedName{Namespace: ns, Name: name}, s); err != nil {
		return err
	}
	s.Status = appsv1.StatefulSetStatus{ObservedGeneration: s.Generation, Replicas: 1, ReadyReplicas: 1, CurrentReplicas: 1,
		UpdatedReplicas: 1, AvailableReplicas: 1, CurrentRevision: name + "-1", UpdateRevision: name + "-1"}
	return j.Local.Status().Update(j.ctx, s)
}

// clusterState is the display state of a joined cluster's Cluster.
func clusterState(j *cluster) string {
	GinkgoHelper()
	c := &fleet.Cluster{}
	Expect(j.Admin.Get(j.ctx, client.ObjectKeyFromObject(j.Cluster), c)).To(Succeed())
	return c.Status.Display.State
}

// checkInReport says, for a failure message, what the manager shows of a
// joined cluster's check-ins: its Ready condition and its agent's Lease as
// the API server has it now, and the agent's last lines.
func checkInReport(j *cluster) string {
	GinkgoHelper()
	c := &fleet.Cluster{}
	Expect(j.Admin.Get(j.ctx, client.ObjectKeyFromObject(j.Cluster), c)).To(Succeed())
	out := fmt.Sprintf("at %s: state %q, lastSeen %s", time.Now().UTC().Format(time.RFC3339Nano), c.Status.Display.State, c.Status.Agent.LastSeen.UTC().Format(time.RFC3339))
	if ready := meta.FindStatusCondition(c.Status.Conditions, fleet.ConditionReady); ready != nil {
		out += fmt.Sprintf(", Ready %s since %s: %s", ready.Status, ready.LastTransitionTime.UTC().Format(time.RFC3339), ready.Message)
	}
	lease := &coordinationv1.Lease{}
	if err := j.Admin.Get(j.ctx, types.NamespacedName{Namespace: c.Status.Namespace, Name: fleet.AgentLeaseName}, lease); err != nil {
		out += fmt.Sprintf("\ncheck-in Lease: %v", err)
	} else if lease.Spec.RenewTime != nil {
		out += fmt.Sprintf("\ncheck-in Lease renewed at %s", lease.Spec.RenewTime.UTC().Format(time.RFC3339Nano))
	}
	return out + "\nagent log:\n" + j.Agent.Tail(6000)
}

// faultSpecs stop the manager's API server and kill an agent mid-install, and
// check the agent carries on.
func faultSpecs(f *fixture) {
	ctx, dev, prod := f.ctx, f.dev, f.prod

	It("keeps running while the manager's API server is down and applies a change made after it is back", func() {
		before := dev.bd("plain")
		By("stopping the manager's API server for 40 seconds")
		f.restartUpstream(40 * time.Second)
		Expect(dev.Agent.Exited()).To(BeFalse(), "the agent survives the outage; log:\n%s", dev.Agent.Tail(6000))
		Expect(prod.Agent.Exited()).To(BeFalse(), "the agent survives the outage; log:\n%s", prod.Agent.Tail(6000))

		By("changing the bundle once the API server is back")
		f.updateBundle("plain", func(b *fleet.Bundle) {
			b.Spec.Resources[0].Content = strings.Replace(b.Spec.Resources[0].Content, "color: blue", "color: purple", 1)
		})
		Eventually(func() string {
			cm := configMap(dev, "plain", "app-config")
			if cm == nil {
				return ""
			}
			return cm.Data["color"]
		}, 90*time.Second, 250*time.Millisecond).Should(Equal("purple"), "agent log:\n%s", dev.Agent.Tail(6000))
		bd := dev.waitState("plain", fleet.Ready, 60*time.Second)
		Expect(bd.Spec.DeploymentID).NotTo(Equal(before.Spec.DeploymentID))
		Expect(bd.Status.Release).To(Equal("plain/plain:2"))
		Expect(dev.Agents).To(HaveLen(1), "the agent was not restarted")
	})

	It("recovers a release left pending by an agent killed in the middle of an install", func() {
		f.newBundle("slow", fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "slow", CreateNamespace: ptr.To(true),
				// Helm waits for the StatefulSet, which nothing makes ready
				// until this test says so: the install stays pending.
				Helm: &fleet.HelmOptions{WaitForJobs: true, TimeoutSeconds: 600}},
			Resources: []fleet.BundleResource{res("db.yaml", slowStatefulSet)},
			Targets:   target("env", "prod"),
		})
		// Helm records the pending release before it creates the objects:
		// wait for both.
		first := &appsv1.StatefulSet{}
		Eventually(func(g Gomega) {
			g.Expect(releaseStatuses(prod, "slow", "slow")).To(Equal([]string{"1:pending-install"}))
			g.Expect(prod.Local.Get(ctx, types.NamespacedName{Namespace: "slow", Name: "db"}, first)).To(Succeed())
		}, 60*time.Second, 100*time.Millisecond).Should(Succeed(), "the install is pending with its StatefulSet created")
		By("killing the agent in the middle of the install")
		prod.Agent.Kill()
		Expect(releaseStatuses(prod, "slow", "slow")).To(Equal([]string{"1:pending-install"}))

		prod.StartAgent()
		// The restarted agent uninstalls the pending release and installs
		// again, which waits for the new StatefulSet: make that one ready.
		Eventually(func(g Gomega) {
			s := &appsv1.StatefulSet{}
			g.Expect(prod.Local.Get(ctx, types.NamespacedName{Namespace: "slow", Name: "db"}, s)).To(Succeed())
			g.Expect(s.UID).NotTo(Equal(first.UID), "the pending install is undone and done again")
			g.Expect(markStatefulSetReady(prod, "slow", "db")).To(Succeed())
			g.Expect(releaseStatuses(prod, "slow", "slow")).To(Equal([]string{"1:deployed"}))
		}, 90*time.Second, 500*time.Millisecond).Should(Succeed(), "agent log:\n%s", prod.Agent.Tail(6000))
		prod.waitState("slow", fleet.Ready, 60*time.Second)
		Expect(prod.Agent.Output()).To(ContainSubstring("left pending"))
	})
}

// connectionFaultSpecs cut a cluster off from the manager and take its
// credential away, and check it catches up and re-registers.
func connectionFaultSpecs(f *fixture) {
	ctx, dev, prod := f.ctx, f.dev, f.prod

	It("shows a cluster cut off from the manager Offline, leaves the others alone, and catches up when it is back", func() {
		Eventually(func() string { return clusterState(prod) }, 30*time.Second, 250*time.Millisecond).ShouldNot(Equal(fleet.ClusterStateOffline))
		By("cutting prod's link to the manager")
		prod.link.Cut()
		cut := time.Now()
		restored := false
		defer func() {
			if !restored {
				prod.link.Restore()
			}
		}()
		f.newBundle("during-cut", fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "cut", CreateNamespace: ptr.To(true)},
			Resources:               []fleet.BundleResource{res("cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: made-during-cut}\ndata: {a: b}\n")},
			Targets:                 []fleet.BundleTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{}}},
		})
		dev.waitState("during-cut", fleet.Ready, 60*time.Second)
		Eventually(func(g Gomega) {
			c := &fleet.Cluster{}
			g.Expect(f.admin.Get(ctx, client.ObjectKeyFromObject(prod.Cluster), c)).To(Succeed())
			g.Expect(c.Status.Display.State).To(Equal(fleet.ClusterStateOffline))
			ready := meta.FindStatusCondition(c.Status.Conditions, fleet.ConditionReady)
			g.Expect(ready).NotTo(BeNil())
			g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(ready.Message).To(ContainSubstring("has not checked in since"))
		}, 60*time.Second, 250*time.Millisecond).Should(Succeed())
		GinkgoWriter.Printf("prod was shown Offline %s after the cut\n", time.Since(cut).Round(time.Second))
		Expect(clusterState(dev)).NotTo(Equal(fleet.ClusterStateOffline), func() string {
			return "the other cluster is unaffected; dev " + checkInReport(dev)
		})
		Expect(configMap(prod, "cut", "made-during-cut")).To(BeNil(), "nothing reaches a cluster cut off")
		Expect(prod.Agent.Exited()).To(BeFalse(), "the agent waits out the cut; log:\n%s", prod.Agent.Tail(6000))

		By("restoring the link")
		prod.link.Restore()
		restored = true
		back := time.Now()
		prod.waitState("during-cut", fleet.Ready, 2*time.Minute)
		Expect(configMap(prod, "cut", "made-during-cut")).NotTo(BeNil())
		Eventually(func() string { return clusterState(prod) }, 60*time.Second, 250*time.Millisecond).ShouldNot(Equal(fleet.ClusterStateOffline))
		GinkgoWriter.Printf("prod caught up %s after the link was restored\n", time.Since(back).Round(time.Second))
		Expect(prod.Agent.Exited()).To(BeFalse())
	})

	It("lets a cluster whose credential Secret was deleted re-register with a token issued for it and keep its identity", func() {
		old := dev.Cred
		cluster := dev.Cluster.DeepCopy()
		By("deleting the agent's credential downstream and restarting the agent")
		Expect(dev.Local.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{
			Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentName}})).To(Succeed())
		dev.Agent.Stop()
		dev.StartAgent()
		Eventually(dev.Agent.Output, 30*time.Second, 250*time.Millisecond).Should(
			ContainSubstring("apply a registration token"), "the agent says what it needs")
		Expect(dev.Agent.Exited()).To(BeFalse(), "it waits for a token rather than crash-looping")

		By("applying a fresh token issued for that cluster (a clientID alone proves nothing)")
		dev.ApplyToken(ctx, "--cluster", cluster.Name)
		dev.WaitRegistered(ctx, registerTimeout)
		Expect(dev.Cluster.Name).To(Equal(cluster.Name), "the same Cluster")
		Expect(dev.Cluster.UID).To(Equal(cluster.UID))
		Expect(dev.Cred.ClusterNamespace).To(Equal(old.ClusterNamespace))
		Expect(dev.Cred.Token).NotTo(Equal(old.Token))
		Eventually(func() error { return upstream.Check(ctx, old) }, 30*time.Second, 250*time.Millisecond).Should(
			MatchError(upstream.ErrRejected), "the lost credential is revoked")
		Expect(upstream.Check(ctx, dev.Cred)).To(Succeed())
		boot := &corev1.Secret{}
		Expect(apierrors.IsNotFound(dev.Local.Get(ctx, types.NamespacedName{
			Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentBootstrapSecretName}, boot))).To(BeTrue(), "the token is forgotten again")

		By("deploying with the new credential")
		f.updateBundle("during-cut", func(b *fleet.Bundle) {
			b.Spec.Resources[0].Content = strings.Replace(b.Spec.Resources[0].Content, "{a: b}", "{a: c}", 1)
		})
		Eventually(func() string {
			cm := configMap(dev, "cut", "made-during-cut")
			if cm == nil {
				return ""
			}
			return cm.Data["a"]
		}, 90*time.Second, 250*time.Millisecond).Should(Equal("c"), "agent log:\n%s", dev.Agent.Tail(6000))
		dev.waitState("during-cut", fleet.Ready, 60*time.Second)
	})
}

// replicaSpecs run two agent replicas with leader election.
func replicaSpecs(f *fixture) {
	dev := f.dev

	It("runs one of two agent replicas with leader election; the other takes over when it dies or stops", func() {
		const lease = 4 * time.Second
		leading := func(p *framework.Process) bool {
			return !p.Exited() && strings.Contains(p.Output(), "Leading: this replica runs the agent")
		}
		color := func(value string) {
			GinkgoHelper()
			f.updateBundle("during-cut", func(b *fleet.Bundle) {
				b.Spec.Resources[0].Content = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: made-during-cut}\ndata: {a: " + value + "}\n"
			})
			Eventually(func() string {
				cm := configMap(dev, "cut", "made-during-cut")
				if cm == nil {
					return ""
				}
				return cm.Data["a"]
			}, 60*time.Second, 250*time.Millisecond).Should(Equal(value))
		}
		elect := []string{"--leader-elect", "--leader-elect-lease-duration", lease.String()}
		dev.Agent.Stop()
		a, b := dev.StartAgent(elect...), dev.StartAgent(elect...)
		Eventually(func() bool { return leading(a) || leading(b) }, 30*time.Second, 100*time.Millisecond).Should(BeTrue())
		leader, standby := a, b
		if leading(b) {
			leader, standby = b, a
		}
		Eventually(standby.Output, 10*time.Second, 100*time.Millisecond).Should(ContainSubstring("Another replica runs the agent"))
		Consistently(func() bool { return leading(standby) }, 2*lease, 200*time.Millisecond).Should(BeFalse(), "one works, the other waits")
		color("leader-1")

		By("killing the leading replica")
		leader.Kill()
		killed := time.Now()
		Eventually(func() bool { return leading(standby) }, 3*lease, 50*time.Millisecond).Should(BeTrue(),
			func() string { return "the standby did not take over:\n" + standby.Tail(6000) })
		GinkgoWriter.Printf("The standby agent took over %s after the leader was killed (lease %s)\n", time.Since(killed), lease)
		Expect(time.Since(killed)).To(BeNumerically("<", 2*lease))
		color("leader-2")

		By("stopping the leading replica gracefully: it gives the lease back")
		next := dev.StartAgent(elect...)
		Eventually(next.Output, 10*time.Second, 100*time.Millisecond).Should(ContainSubstring("Another replica runs the agent"))
		stopped := time.Now()
		standby.Stop()
		Expect(standby.Exited()).To(BeTrue())
		Expect(standby.Output()).To(ContainSubstring("Released the agent's leader lease"))
		// Timed from the exit, not from the stop: how long a loaded
		// machine takes to end the agent's work is not the lease's wait.
		exited := time.Now()
		Eventually(func() bool { return leading(next) }, 3*lease, 50*time.Millisecond).Should(BeTrue())
		GinkgoWriter.Printf("After a graceful stop (%s) the next agent led in %s\n", exited.Sub(stopped), time.Since(exited))
		Expect(time.Since(exited)).To(BeNumerically("<", lease), "no wait for the lease to expire")
		dev.Agent = next
		color("leader-3")
		dev.waitState("during-cut", fleet.Ready, 60*time.Second)
	})
}

// latencySpecs measure how quickly changes reach Ready.
func latencySpecs(f *fixture) {
	ctx, dev := f.ctx, f.dev

	It("measures the time from a BundleDeployment change to Ready for 50 bundles on one cluster", func() {
		const n = 50
		bundle := func(i int) string { return fmt.Sprintf("bench-%02d", i) }
		for i := range n {
			f.newBundle(bundle(i), fleet.BundleSpec{
				BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "bench", CreateNamespace: ptr.To(true)},
				Resources: []fleet.BundleResource{res("cm.yaml", fmt.Sprintf(
					"apiVersion: v1\nkind: ConfigMap\nmetadata: {name: %s}\ndata: {round: \"0\"}\n", bundle(i)))},
				Targets: target("env", "dev"),
			})
		}
		ready := func(g Gomega) {
			for i := range n {
				bd := dev.bd(bundle(i))
				g.Expect(bd).NotTo(BeNil())
				g.Expect(summary.State(bd)).To(Equal(fleet.Ready), bundle(i))
			}
		}
		Eventually(ready, 3*time.Minute, time.Second).Should(Succeed(), "agent log:\n%s", dev.Agent.Tail(6000))

		// Watch the BundleDeployments: note when each one's deploymentID
		// changes and when it is Ready with that deploymentID applied.
		wc, err := client.NewWithWatch(f.upstream.Config, client.Options{Scheme: controllers.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		w, err := wc.Watch(ctx, &fleet.BundleDeploymentList{}, client.InNamespace(dev.Cred.ClusterNamespace))
		Expect(err).NotTo(HaveOccurred())
		defer w.Stop()
		var mu sync.Mutex
		changed, readyAt := map[string]time.Time{}, map[string]time.Time{}
		initial := map[string]string{}
		for i := range n {
			initial[bundle(i)] = dev.bd(bundle(i)).Spec.DeploymentID
		}
		go func() {
			defer GinkgoRecover()
			for ev := range w.ResultChan() {
				if ev.Type != watch.Modified && ev.Type != watch.Added {
					continue
				}
				bd, ok := ev.Object.(*fleet.BundleDeployment)
				if !ok || !strings.HasPrefix(bd.Name, "bench-") || bd.Spec.DeploymentID == initial[bd.Name] {
					continue
				}
				now := time.Now()
				mu.Lock()
				if _, seen := changed[bd.Name]; !seen {
					changed[bd.Name] = now
				}
				if _, seen := readyAt[bd.Name]; !seen && summary.State(bd) == fleet.Ready {
					readyAt[bd.Name] = now
				}
				mu.Unlock()
			}
		}()
		for i := range n {
			f.updateBundle(bundle(i), func(b *fleet.Bundle) {
				b.Spec.Resources[0].Content = strings.Replace(b.Spec.Resources[0].Content, `round: "0"`, `round: "1"`, 1)
			})
		}
		Eventually(func() int {
			mu.Lock()
			defer mu.Unlock()
			return len(readyAt)
		}, 3*time.Minute, 250*time.Millisecond).Should(Equal(n), "agent log:\n%s", dev.Agent.Tail(6000))
		mu.Lock()
		latencies := make([]time.Duration, 0, n)
		for name, t := range readyAt {
			latencies = append(latencies, t.Sub(changed[name]))
		}
		mu.Unlock()
		sort.Slice(latencies, func(i, j int) bool { return latencies[i] < latencies[j] })
		msg := fmt.Sprintf("BundleDeployment change to Ready, %d bundles on one cluster: p50 %s, p99 %s, max %s",
			n, latencies[n/2].Round(time.Millisecond), latencies[n*99/100].Round(time.Millisecond), latencies[n-1].Round(time.Millisecond))
		AddReportEntry("agent-50-bundles", msg)
		GinkgoWriter.Println(msg)
		fmt.Println(msg)
		Expect(configMap(dev, "bench", bundle(0)).Data).To(HaveKeyWithValue("round", "1"))
	})
}
