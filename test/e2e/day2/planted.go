package day2

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/capi"
	"github.com/gitfleet/fleet/internal/diagnose"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// parkedShard is a shard no manager of the suite serves: a GitRepo or
// Bundle labelled with it is what a fleet whose manager of that shard is
// down looks like, frozen as it was.
const parkedShard = "day2-parked"

// neverReady is a Deployment: no kubelet runs downstream, so it never
// becomes available and its deployment stays NotReady.
const neverReady = `apiVersion: apps/v1
kind: Deployment
metadata:
  name: never-ready
spec:
  replicas: 1
  selector: {matchLabels: {app: never-ready}}
  template:
    metadata: {labels: {app: never-ready}}
    spec:
      containers:
      - name: app
        image: example.invalid/never-ready:1
`

// configMap is a ConfigMap named name, as a bundle resource.
func configMapResource(name string) fleet.BundleResource {
	return fleet.BundleResource{Name: name + ".yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\ndata: {k: v}\n"}
}

// envSelector selects the clusters labelled env with one of envs.
func envSelector(envs ...string) *metav1.LabelSelector {
	return &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: envs}}}
}

// envTargets targets the clusters labelled env with one of envs.
func envTargets(envs ...string) []fleet.BundleTarget {
	return []fleet.BundleTarget{{Name: "env", ClusterSelector: envSelector(envs...)}}
}

// newBundle creates a Bundle of the workspace, written as a GitRepo's
// would be, and deletes it when the spec ends.
func (f *fixture) newBundle(name string, spec fleet.BundleSpec) *fleet.Bundle {
	GinkgoHelper()
	if spec.DefaultNamespace == "" {
		spec.DefaultNamespace = name
	}
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: name}, Spec: spec}
	f.create(b)
	return b
}

// create creates obj and deletes it when the spec ends.
func (f *fixture) create(obj client.Object) {
	GinkgoHelper()
	Expect(f.admin.Create(f.ctx, obj)).To(Succeed())
	DeferCleanup(func() {
		Expect(client.IgnoreNotFound(f.admin.Delete(f.ctx, obj))).To(Succeed())
	})
}

// update reads obj, changes it with change and writes it, retrying on
// conflicts.
func (f *fixture) update(obj client.Object, change func()) {
	GinkgoHelper()
	Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := f.admin.Get(f.ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		change()
		return f.admin.Update(f.ctx, obj)
	})).To(Succeed())
}

// relabel sets (value non-empty) or removes a label of obj.
func (f *fixture) relabel(obj client.Object, key, value string) {
	GinkgoHelper()
	f.update(obj, func() {
		l := obj.GetLabels()
		if l == nil {
			l = map[string]string{}
		}
		if value == "" {
			delete(l, key)
		} else {
			l[key] = value
		}
		obj.SetLabels(l)
	})
}

// expectFinding runs analyze with args on the live fleet and on a dump
// archive taken right after (liveAndDump), and returns the live finding of
// check about object, having checked that both exit 1, both report it
// alike, its action says action, and that the two analyses agree on every
// finding.
func (f *fixture) expectFinding(args []string, check, object, action string) diagnose.Finding {
	GinkgoHelper()
	live, offline, _ := f.liveAndDump(args...)
	fd := finding(live, check, object)
	Expect(fd.Action).To(ContainSubstring(action))
	off := finding(offline, check, object)
	Expect(off.Severity).To(Equal(fd.Severity))
	Expect(off.Action).To(Equal(fd.Action))
	return fd
}

// waitBD waits for the cluster's BundleDeployment of a bundle to satisfy
// cond, and returns it.
func (f *fixture) waitBD(c *e2e.JoinedCluster, bundle, what string, cond func(g Gomega, bd *fleet.BundleDeployment)) *fleet.BundleDeployment {
	GinkgoHelper()
	var out *fleet.BundleDeployment
	e2e.WaitFor(fmt.Sprintf("BundleDeployment %s on %s: %s", bundle, c.Cluster.Name, what), func(g Gomega) {
		bd := f.bd(c, bundle)
		g.Expect(bd).NotTo(BeNil(), "no BundleDeployment %s for %s yet", bundle, c.Cluster.Name)
		cond(g, bd)
		out = bd
	}, 90*time.Second, 250*time.Millisecond)
	return out
}

// olderThan waits until t is more than d in the past: a threshold given
// to analyze (--stuck-after) is then passed. Times in status and the
// snapshot's are whole seconds: a second more.
func olderThan(t time.Time, d time.Duration) {
	if wait := time.Until(t.Add(d + 1100*time.Millisecond)); wait > 0 {
		time.Sleep(wait)
	}
}

// waitUnchangedFor waits until the cluster's BundleDeployment of a bundle
// has been in its Ready condition's state (or, without one, existed) for
// more than d, as stuck-wait-applied measures it.
func (f *fixture) waitUnchangedFor(c *e2e.JoinedCluster, bundle string, d time.Duration) {
	GinkgoHelper()
	e2e.WaitFor(fmt.Sprintf("BundleDeployment %s on %s to be unchanged for %s", bundle, c.Cluster.Name, d), func(g Gomega) {
		bd := f.bd(c, bundle)
		g.Expect(bd).NotTo(BeNil())
		t := bd.CreationTimestamp.Time
		if r := meta.FindStatusCondition(bd.Status.Conditions, fleet.ConditionReady); r != nil {
			t = r.LastTransitionTime.Time
		}
		g.Expect(time.Since(t)).To(BeNumerically(">", d+1100*time.Millisecond))
	}, 30*time.Second, 250*time.Millisecond)
}

// oneSpecPerCheckSteps plants, one spec per check, each problem analyze
// looks for that the other specs do not plant, finds it live and on a
// dump archive, and removes it again. Problems about agents are made by
// the real agents; those the agents have no part in are written as the
// manager or a stopped manager would leave them.
func oneSpecPerCheckSteps(f *fixture) {
	It("agent-outdated: an agent Bundle offering another image than the fleet's", func() {
		// The suite runs no agentbundle controller: its Deployment would
		// never be available downstream without a kubelet. The agent
		// Bundles are written as it writes them.
		for _, c := range []*e2e.JoinedCluster{f.prod, f.dev} {
			image := "example.invalid/fleet-agent:v2"
			if c == f.prod {
				image = "example.invalid/fleet-agent:v1"
			}
			f.create(&fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: "fleet-agent-" + c.Cluster.Name,
				Labels:      map[string]string{fleet.AgentBundleLabel: "true"},
				Annotations: map[string]string{fleet.AgentImageAnnotation: image}}})
		}
		fd := f.expectFinding([]string{"--agent-image", "example.invalid/fleet-agent:v2"}, diagnose.CheckAgentOutdated,
			"Bundle "+ws+"/fleet-agent-"+f.prod.Cluster.Name, "rollout strategy")
		Expect(fd.Message).To(ContainSubstring("runs example.invalid/fleet-agent:v1, not example.invalid/fleet-agent:v2"))
	})

	It("stuck-wait-applied: a paused bundle the dev agent does not apply", func() {
		f.newBundle("day2-paused", fleet.BundleSpec{Paused: true, Resources: []fleet.BundleResource{configMapResource("paused")}, Targets: envTargets("dev")})
		f.waitBD(f.dev, "day2-paused", "paused, waiting to be applied", func(g Gomega, bd *fleet.BundleDeployment) {
			g.Expect(bd.Spec.Paused).To(BeTrue())
			g.Expect(summary.State(bd)).To(Equal(fleet.WaitApplied))
		})
		f.waitUnchangedFor(f.dev, "day2-paused", time.Second)
		fd := f.expectFinding([]string{"--stuck-after", "1s"}, diagnose.CheckStuckWaitApplied, bdObject(f.dev, "day2-paused"), "unpause")
		Expect(fd.Message).To(ContainSubstring("waiting to be applied on cluster " + ws + "/" + f.dev.Cluster.Name))
		Expect(fd.Message).To(ContainSubstring("it is paused"))
	})

	It("modified: an object changed on the prod cluster", func() {
		cm := f.configMap(f.prod, appNS, "settings")
		cm.Data["owner"] = "someone-else"
		Expect(f.prod.Local.Update(f.ctx, cm)).To(Succeed())
		f.waitState(f.prod, appBundle, fleet.Modified, 60*time.Second)
		fd := f.expectFinding(nil, diagnose.CheckModified, bdObject(f.prod, appBundle), "fleet bundlediff")
		Expect(fd.Message).To(ContainSubstring(appNS + "/settings"))

		By("put back, the deployment is Ready again")
		cm = f.configMap(f.prod, appNS, "settings")
		cm.Data["owner"] = "platform"
		Expect(f.prod.Local.Update(f.ctx, cm)).To(Succeed())
		f.waitState(f.prod, appBundle, fleet.Ready, 60*time.Second)
	})

	It("rollout-held: a partition holds the dev cluster while the prod cluster is not ready, and names both", func() {
		b := f.newBundle("day2-held", fleet.BundleSpec{
			Resources: []fleet.BundleResource{configMapResource("held")},
			Targets:   envTargets("prod", "dev"),
			RolloutStrategy: &fleet.RolloutStrategy{MaxUnavailable: ptr.To(intstr.FromInt32(1)), Partitions: []fleet.Partition{
				{Name: "prod", ClusterSelector: envSelector("prod")}, {Name: "dev", ClusterSelector: envSelector("dev")}}},
		})
		f.waitState(f.prod, "day2-held", fleet.Ready, 90*time.Second)
		f.waitState(f.dev, "day2-held", fleet.Ready, 90*time.Second)
		By("a new version that never becomes ready: the prod partition moves first, the dev one waits")
		f.update(b, func() {
			b.Spec.Resources = append(b.Spec.Resources, fleet.BundleResource{Name: "never-ready.yaml", Content: neverReady})
		})
		f.waitState(f.prod, "day2-held", fleet.NotReady, 90*time.Second)
		f.waitBD(f.dev, "day2-held", "OutOfSync", func(g Gomega, bd *fleet.BundleDeployment) {
			g.Expect(summary.State(bd)).To(Equal(fleet.OutOfSync))
		})
		fd := f.expectFinding(nil, diagnose.CheckRolloutHeld, "Bundle "+ws+"/day2-held", "maxUnavailable")
		Expect(fd.Message).To(ContainSubstring("the rollout holds 1 cluster(s) at the previous version: " + ws + "/" + f.dev.Cluster.Name))
		Expect(fd.Message).To(ContainSubstring("not ready, and so holding it: " + ws + "/" + f.prod.Cluster.Name + " (NotReady)"))
	})

	It("dependson-waiting: a bundle waiting for a dependency that is not ready, and one whose dependency is not there", func() {
		f.newBundle("day2-dep", fleet.BundleSpec{Resources: []fleet.BundleResource{{Name: "never-ready.yaml", Content: neverReady}}, Targets: envTargets("dev")})
		f.newBundle("day2-waiter", fleet.BundleSpec{Resources: []fleet.BundleResource{configMapResource("waiter")}, Targets: envTargets("dev"),
			DependsOn: []fleet.BundleRef{{Name: "day2-dep"}}})
		f.newBundle("day2-orphan", fleet.BundleSpec{Resources: []fleet.BundleResource{configMapResource("orphan")}, Targets: envTargets("dev"),
			DependsOn: []fleet.BundleRef{{Name: "day2-absent"}}})
		// The dependency settles first: deployed and NotReady, not waiting
		// to be applied, which --stuck-after 1s would report as well.
		f.waitState(f.dev, "day2-dep", fleet.NotReady, 90*time.Second)
		waiting := f.waitBD(f.dev, "day2-waiter", "waiting for its dependency", func(g Gomega, bd *fleet.BundleDeployment) {
			c := meta.FindStatusCondition(bd.Status.Conditions, fleet.ConditionDeployed)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(fleet.ReasonWaitingForDeps))
			g.Expect(c.Status).To(Equal(metav1.ConditionUnknown))
		})
		f.waitBD(f.dev, "day2-orphan", "its dependency missing", func(g Gomega, bd *fleet.BundleDeployment) {
			c := meta.FindStatusCondition(bd.Status.Conditions, fleet.ConditionDeployed)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Reason).To(Equal(fleet.ReasonWaitingForDeps))
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		})
		olderThan(meta.FindStatusCondition(waiting.Status.Conditions, fleet.ConditionDeployed).LastTransitionTime.Time, time.Second)
		fd := f.expectFinding([]string{"--stuck-after", "1s"}, diagnose.CheckDependsOnWaiting, bdObject(f.dev, "day2-waiter"), "make the named bundles Ready")
		Expect(fd.Severity).To(Equal(diagnose.Warning))
		Expect(fd.Message).To(ContainSubstring("day2-dep"))
		a, _ := f.analyze("-k", f.kubeconfig)
		orphan := finding(a, diagnose.CheckDependsOnWaiting, bdObject(f.dev, "day2-orphan"))
		Expect(orphan.Severity).To(Equal(diagnose.Critical))
		Expect(orphan.Action).To(ContainSubstring("target the bundle it depends on"))
	})

	It("dependson-cycle: two bundles depending on each other", func() {
		f.newBundle("day2-cycle-a", fleet.BundleSpec{DependsOn: []fleet.BundleRef{{Name: "day2-cycle-b"}}})
		f.newBundle("day2-cycle-b", fleet.BundleSpec{DependsOn: []fleet.BundleRef{{Name: "day2-cycle-a"}}})
		fd := f.expectFinding(nil, diagnose.CheckDependsOnCycle, "Bundle "+ws+"/day2-cycle-a", "remove one of the dependsOn")
		Expect(fd.Severity).To(Equal(diagnose.Critical))
		Expect(fd.Message).To(ContainSubstring("day2-cycle-a -> day2-cycle-b -> day2-cycle-a"))
	})

	It("cluster-not-imported: a Cluster whose kubeconfig Secret does not exist", func() {
		// Cluster API's enrollment creates such a Cluster (see
		// controllers/capi); the import is what fails here, as it fails for
		// a Cluster API cluster whose kubeconfig Secret is not there.
		c := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: "day2-noimport"},
			Spec: fleet.ClusterSpec{KubeConfigSecret: "day2-noimport-kubeconfig"}}
		f.create(c)
		e2e.WaitFor("the Cluster's Imported condition to be False", func(g Gomega) {
			g.Expect(f.admin.Get(f.ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
			g.Expect(meta.IsStatusConditionFalse(c.Status.Conditions, fleet.ConditionImported)).To(BeTrue(), "conditions: %v", c.Status.Conditions)
		}, 60*time.Second, 250*time.Millisecond)
		fd := f.expectFinding(nil, diagnose.CheckNotImported, "Cluster "+ws+"/day2-noimport", "kubeconfig Secret")
		Expect(fd.Message).To(ContainSubstring(fleet.ReasonSecretNotFound))
		Expect(fd.Message).To(ContainSubstring("day2-noimport-kubeconfig"))
	})

	It("cluster-not-imported: a Cluster API cluster enrolled whose kubeconfig Secret does not parse", func() {
		// The suite's manager cluster serves Cluster API's Cluster kind, and
		// the manager runs its Cluster API enrollment: a Cluster API
		// Cluster, its control plane initialized and its kubeconfig Secret
		// written as Cluster API does, is enrolled as a fleet Cluster, whose
		// import then fails.
		name := "day2-capi"
		c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: name},
			Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 6443}}}
		f.create(c)
		patch := client.RawPatch(types.MergePatchType, []byte(`{"status":{"initialization":{"controlPlaneInitialized":true}}}`))
		Expect(f.admin.Status().Patch(f.ctx, c, patch)).To(Succeed())
		f.create(&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: capi.KubeconfigSecretName(name),
			Labels: map[string]string{clusterv1.ClusterNameLabel: name}},
			Type: clusterv1.ClusterSecretType, Data: map[string][]byte{fleet.KubeConfigSecretValueKey: []byte("not: [a kubeconfig")}})
		fc := &fleet.Cluster{}
		e2e.WaitFor("the enrolled fleet Cluster's import to fail", func(g Gomega) {
			g.Expect(f.admin.Get(f.ctx, types.NamespacedName{Namespace: ws, Name: name}, fc)).To(Succeed())
			g.Expect(fc.Spec.KubeConfigSecret).To(Equal(capi.KubeconfigSecretName(name)))
			g.Expect(meta.IsStatusConditionFalse(fc.Status.Conditions, fleet.ConditionImported)).To(BeTrue(), "conditions: %v", fc.Status.Conditions)
		}, 60*time.Second, 250*time.Millisecond)
		fd := f.expectFinding(nil, diagnose.CheckNotImported, "Cluster "+ws+"/"+name, "Cluster API's bootstrap")
		Expect(fd.Severity).To(Equal(diagnose.Critical))
		Expect(fd.Message).To(ContainSubstring(fleet.ReasonKubeconfigInvalid))
		Expect(fd.Message).To(ContainSubstring(capi.KubeconfigSecretName(name)))
	})

	It("capi-not-enrolled: a Cluster API cluster, its control plane initialized, whose kubeconfig Secret never comes", func() {
		// The manager's enrolment waits for the Secret Cluster API writes
		// once the control plane is up; it never comes here, so the
		// cluster stays not enrolled, and analyze says why.
		name := "day2-capi-nosecret"
		c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ws, Name: name},
			Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 6443}}}
		f.create(c)
		patch := client.RawPatch(types.MergePatchType, []byte(`{"status":{"phase":"Provisioned","initialization":{"controlPlaneInitialized":true}}}`))
		Expect(f.admin.Status().Patch(f.ctx, c, patch)).To(Succeed())
		var since time.Time
		e2e.WaitFor("the enrolment to wait for the kubeconfig Secret", func(g Gomega) {
			g.Expect(f.admin.Get(f.ctx, client.ObjectKeyFromObject(c), c)).To(Succeed())
			cond := meta.FindStatusCondition(c.Status.Conditions, capi.ConditionFleetAgentReady)
			g.Expect(cond).NotTo(BeNil(), "conditions: %v", c.Status.Conditions)
			g.Expect(cond.Reason).To(Equal(fleet.ReasonWaitingForControlPlane))
			g.Expect(cond.Message).To(ContainSubstring(capi.KubeconfigSecretName(name)))
			since = cond.LastTransitionTime.Time
		}, 60*time.Second, 250*time.Millisecond)
		olderThan(since, time.Second)
		fd := f.expectFinding([]string{"--stuck-after", "1s"}, diagnose.CheckCAPINotEnrolled, "Cluster.cluster.x-k8s.io "+ws+"/"+name,
			"Cluster API writes the Secret "+capi.KubeconfigSecretName(name))
		Expect(fd.Severity).To(Equal(diagnose.Warning))
		Expect(fd.Message).To(ContainSubstring("its control plane is initialized (phase Provisioned), and it has not been enrolled for"))
		Expect(fd.Message).To(ContainSubstring(fleet.ReasonWaitingForControlPlane + ": waiting for the kubeconfig Secret " + capi.KubeconfigSecretName(name)))

		By("paused, it is worth knowing only; opted out, it is no finding")
		f.update(c, func() { c.Spec.Paused = ptr.To(true) })
		a, _ := f.analyze("-k", f.kubeconfig, "--stuck-after", "1s")
		// The condition still tells why; the paused cluster is info.
		Expect(finding(a, diagnose.CheckCAPINotEnrolled, "Cluster.cluster.x-k8s.io "+ws+"/"+name).Severity).To(Equal(diagnose.Info))
		f.update(c, func() { c.Spec.Paused = nil })
		f.relabel(c, capi.EnrollLabel, "false")
		e2e.WaitFor("analyze to leave the opted-out cluster out", func(g Gomega) {
			a, _ := f.analyze("-k", f.kubeconfig, "--stuck-after", "1s")
			for _, fd := range a.Findings {
				g.Expect(fd.Object).NotTo(Equal("Cluster.cluster.x-k8s.io "+ws+"/"+name), "%s", fd)
			}
		}, 30*time.Second, time.Second)
	})

	It("gitrepo-fetch-failed: a GitRepo following a branch that does not exist", func() {
		g := f.gitRepoObject()
		g.Name, g.Spec.Branch, g.Spec.Targets = "day2-nobranch", "no-such-branch", nil
		f.create(g)
		e2e.WaitFor("the GitRepo's fetch to fail", func(gm Gomega) {
			gm.Expect(f.admin.Get(f.ctx, client.ObjectKeyFromObject(g), g)).To(Succeed())
			gm.Expect(meta.IsStatusConditionFalse(g.Status.Conditions, fleet.ConditionGitPolling)).To(BeTrue(), "conditions: %v", g.Status.Conditions)
		}, 60*time.Second, 250*time.Millisecond)
		fd := f.expectFinding(nil, diagnose.CheckGitRepoFetch, "GitRepo "+ws+"/day2-nobranch", "branch or revision")
		Expect(fd.Message).To(ContainSubstring("no-such-branch"))
	})

	It("gitrepo-behind: a GitRepo its manager (of a shard no manager serves) last polled an hour ago", func() {
		g := f.gitRepoObject()
		g.Name, g.Labels, g.Spec.Targets = "day2-stale", map[string]string{fleet.ShardRefLabel: parkedShard}, nil
		g.Spec.PollingInterval = &metav1.Duration{Duration: 15 * time.Second}
		f.create(g)
		// What its manager wrote before it stopped.
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			if err := f.admin.Get(f.ctx, client.ObjectKeyFromObject(g), g); err != nil {
				return err
			}
			g.Status.Commit = f.commits[0]
			g.Status.LastPollingTriggered = metav1.NewTime(time.Now().Add(-time.Hour))
			return f.admin.Status().Update(f.ctx, g)
		})).To(Succeed())
		fd := f.expectFinding(nil, diagnose.CheckGitRepoBehind, "GitRepo "+ws+"/day2-stale", "is the manager running")
		Expect(fd.Message).To(MatchRegexp(`last polled 1h0m\d+s ago, its interval is 15s`))
	})

	It("values-render-differently: a cluster label a customization reads, not rendered by its (stopped) manager", func() {
		b := f.newBundle("day2-values", fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]interface{}{"tier": "bronze"}}}},
			Resources:               []fleet.BundleResource{configMapResource("values")},
			Targets: []fleet.BundleTarget{
				{Name: "gold", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod", "day2-tier": "gold"}},
					BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]interface{}{"tier": "gold"}}}}},
				{Name: "prod", ClusterSelector: envSelector("prod")},
			},
		})
		f.waitState(f.prod, "day2-values", fleet.Ready, 90*time.Second)
		e2e.WaitFor("the manager to observe the Bundle", func(g Gomega) {
			g.Expect(f.admin.Get(f.ctx, client.ObjectKeyFromObject(b), b)).To(Succeed())
			g.Expect(b.Status.ObservedGeneration).To(Equal(b.Generation))
		}, 30*time.Second, 250*time.Millisecond)
		a, _ := f.analyze("-k", f.kubeconfig)
		for _, fd := range a.Findings {
			Expect(fd.Check).NotTo(Equal(diagnose.CheckValuesDiffer), "what the manager wrote is what it renders: %s", fd)
		}

		By("the Bundle moved to a shard no manager serves, then the prod cluster labelled for the gold customization")
		f.relabel(b, fleet.ShardRefLabel, parkedShard)
		DeferCleanup(func() { f.relabel(b, fleet.ShardRefLabel, "") }) // before the delete: its manager removes the finalizer
		// The manager must have let the Bundle go before the cluster is
		// relabelled, or it renders the gold options itself. Its Bundle
		// watch delivers events in order: once it has observed a Bundle
		// created after the move, it has seen the move.
		sentinel := f.newBundle("day2-values-after", fleet.BundleSpec{Resources: []fleet.BundleResource{configMapResource("after")}})
		e2e.WaitFor("the manager to observe a Bundle created after the move", func(g Gomega) {
			g.Expect(f.admin.Get(f.ctx, client.ObjectKeyFromObject(sentinel), sentinel)).To(Succeed())
			g.Expect(sentinel.Status.ObservedGeneration).To(Equal(sentinel.Generation))
		}, 30*time.Second, 250*time.Millisecond)
		Expect(client.IgnoreNotFound(f.admin.Delete(f.ctx, sentinel))).To(Succeed())
		cluster := &fleet.Cluster{}
		cluster.Namespace, cluster.Name = f.prod.Cluster.Namespace, f.prod.Cluster.Name
		f.relabel(cluster, "day2-tier", "gold")
		DeferCleanup(func() { f.relabel(cluster, "day2-tier", "") })
		e2e.HoldsFor("the parked Bundle's BundleDeployment to keep its options", func(g Gomega) {
			bd := f.bd(f.prod, "day2-values")
			g.Expect(bd.Spec.Options.Helm.Values.Data).To(HaveKeyWithValue("tier", "bronze"))
		}, 2*time.Second, 250*time.Millisecond)

		fd := f.expectFinding(nil, diagnose.CheckValuesDiffer, bdObject(f.prod, "day2-values"), "the manager of shard "+parkedShard)
		Expect(fd.Severity).To(Equal(diagnose.Warning))
		Expect(fd.Message).To(ContainSubstring("for cluster " + ws + "/" + f.prod.Cluster.Name + " the manager would now render other options"))
		Expect(fd.Message).To(ContainSubstring(`helm.values.tier: held "bronze", now "gold"`))
		Expect(fd.Message).To(ContainSubstring("the cluster runs the held ones"))
	})
}
