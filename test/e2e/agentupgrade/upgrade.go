package agentupgrade

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/agentbundle"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// SpecInput is what the agent upgrade spec needs.
type SpecInput struct {
	// Upstream is the manager's control plane, Admin an admin client of it.
	Upstream *controlplane.ControlPlane
	Admin    client.Client
	// Downstreams are the clusters that join; each runs
	// kube-controller-manager alone (controlplane.Workloads.ControllersOnly).
	Downstreams []*controlplane.ControlPlane
	// LogDir receives the agents' logs.
	LogDir string
	// Binaries maps the agent images to fleet-agent binaries, and Versions
	// the images to the version each binary reports.
	Binaries map[string]string
	Versions map[string]string
	// OldImage is installed first; NewImage is offered next; BrokenImage
	// has no binary (its pods never start).
	OldImage, NewImage, BrokenImage string
	// StartManager (re)starts the manager offering image, and returns
	// what stops it.
	StartManager func(image string) (stop func())
	// MaxInFlight is the manager's rollout budget for len(Downstreams)
	// clusters.
	MaxInFlight int
}

// agentCluster is one joined cluster and what runs its agent.
type agentCluster struct {
	cp      *controlplane.ControlPlane
	local   client.Client
	kubelet *Kubelet
	name    string // the Fleet Cluster's name
}

const (
	workspace  = fleet.DefaultWorkspace
	appNS      = "agentupgrade-app"
	appBundle  = "agentupgrade-app"
	agentNS    = fleet.DefaultSystemNamespace
	waitJoin   = 3 * time.Minute
	waitRollIn = 4 * time.Minute
)

// agentUpgrade is what the steps of AgentUpgradeSpec share.
type agentUpgrade struct {
	ctx         context.Context
	in          SpecInput
	clusters    []*agentCluster
	stopManager func()
	stopKubelet context.CancelFunc
	releases    map[string][]string
}

// AgentUpgradeSpec registers every downstream cluster by token, with its
// agent run from its Deployment, then rolls a new agent version across them.
func AgentUpgradeSpec(ctx context.Context, inputGetter func() SpecInput) {
	s := &agentUpgrade{ctx: ctx}
	BeforeAll(func() {
		s.in = inputGetter()
		Expect(s.in.Downstreams).NotTo(BeEmpty())
		var kctx context.Context
		kctx, s.stopKubelet = context.WithCancel(s.ctx)
		s.stopManager = s.in.StartManager(s.in.OldImage)
		for _, cp := range s.in.Downstreams {
			local, err := cp.Client(scheme.Scheme)
			Expect(err).NotTo(HaveOccurred())
			k := &Kubelet{Cluster: cp.Name, Client: local, Kubeconfig: cp.Kubeconfig, Namespace: agentNS, Binaries: s.in.Binaries, LogDir: s.in.LogDir}
			go k.Run(kctx, 200*time.Millisecond)
			s.clusters = append(s.clusters, &agentCluster{cp: cp, local: local, kubelet: k})
		}
		GinkgoWriter.Printf("Logs of agents are in %s\n", s.in.LogDir)
	})
	AfterAll(func() {
		if s.stopKubelet != nil {
			s.stopKubelet()
		}
		if s.stopManager != nil {
			s.stopManager()
		}
	})

	joinSteps(s)
	rolloutSteps(s)
	settingsSteps(s)
	budgetSteps(s)
}

// joinSteps: every cluster joins, its agent run from its Deployment, and
// gets a workload.
func joinSteps(s *agentUpgrade) {
	It("joins every cluster, by token or imported, its agent run from its Deployment, which the agent then takes over from its agent Bundle", func() {
		for i, c := range s.clusters {
			if i == len(s.clusters)-1 {
				// The last one is imported: the manager installs the agent
				// through the cluster's kubeconfig, then the agent Bundle
				// takes over as for the others.
				kubeconfig, err := os.ReadFile(c.cp.Kubeconfig)
				Expect(err).NotTo(HaveOccurred())
				Expect(s.in.Admin.Create(s.ctx, &corev1.Secret{
					ObjectMeta: metav1.ObjectMeta{Namespace: workspace, Name: "imported-kubeconfig"},
					Data:       map[string][]byte{fleet.KubeConfigSecretValueKey: kubeconfig},
				})).To(Succeed())
				Expect(s.in.Admin.Create(s.ctx, &fleet.Cluster{
					ObjectMeta: metav1.ObjectMeta{Namespace: workspace, Name: "imported"},
					Spec:       fleet.ClusterSpec{KubeConfigSecret: "imported-kubeconfig"},
				})).To(Succeed())
				continue
			}
			_, boot, err := agentinstall.CreateToken(s.ctx, s.in.Admin, agentinstall.TokenOptions{Namespace: workspace, TTL: time.Hour})
			Expect(err).NotTo(HaveOccurred())
			// What `fleet install agent-token --agent-image OLD` prints.
			objs, err := agentinstall.Objects(agentinstall.Options{Image: s.in.OldImage, Bootstrap: boot})
			Expect(err).NotTo(HaveOccurred())
			Expect(agentinstall.Apply(s.ctx, c.local, objs)).To(Succeed())
		}
		e2e.WaitFor("every agent to register", func(g Gomega) {
			byID := registeredClusters(s.ctx, g, s.in.Admin)
			for _, c := range s.clusters {
				uid, err := c.cp.KubeSystemUID(s.ctx)
				g.Expect(err).NotTo(HaveOccurred())
				g.Expect(byID).To(HaveKey(string(uid)), "cluster %s has not registered", c.cp.Name)
				c.name = byID[string(uid)]
			}
		}, waitJoin, time.Second)
		e2e.WaitFor("every cluster's agent Bundle to be deployed and Ready", func(g Gomega) {
			g.Expect(readyAgentBundles(s.ctx, g, s.in.Admin)).To(HaveLen(len(s.clusters)))
		}, waitJoin, time.Second)
		for _, c := range s.clusters {
			dep := agentDeployment(s.ctx, Default, c)
			Expect(dep.Annotations).To(HaveKeyWithValue("meta.helm.sh/release-name", Not(BeEmpty())),
				"the agent's release has taken over the Deployment of cluster %s", c.cp.Name)
			Expect(running(c)).To(ConsistOf(s.in.OldImage), "one agent runs on %s", c.cp.Name)
		}
	})

	It("deploys a workload to every cluster", func() {
		cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  k: v\n"
		Expect(s.in.Admin.Create(s.ctx, &fleet.Bundle{
			ObjectMeta: metav1.ObjectMeta{Namespace: workspace, Name: appBundle},
			Spec: fleet.BundleSpec{
				BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: appNS},
				Resources:               []fleet.BundleResource{{Name: "cm.yaml", Content: cm}},
				Targets:                 []fleet.BundleTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{}}},
			},
		})).To(Succeed())
		e2e.WaitFor("the workload to be Ready on every cluster", func(g Gomega) {
			g.Expect(readyBundleDeployments(s.ctx, g, s.in.Admin, client.MatchingLabels{fleet.BundleNameLabel: appBundle})).To(HaveLen(len(s.clusters)))
		}, waitJoin, time.Second)
		s.releases = helmReleases(s.ctx, Default, s.clusters)
	})
}

// rolloutSteps: a new agent version rolls across every cluster within the
// budget, the releases kept.
func rolloutSteps(s *agentUpgrade) {
	It("rolls a new agent version across every cluster with at most the configured number in flight, the releases untouched", func() {
		smp := &sampler{}
		sctx, stopSampling := context.WithCancel(s.ctx)
		sampled := make(chan struct{})
		go func() { defer close(sampled); smp.run(sctx, s.clusters, 100*time.Millisecond) }()
		start := time.Now()
		s.stopManager()
		s.stopManager = s.in.StartManager(s.in.NewImage)

		e2e.WaitFor("every cluster to run the new agent version", func(g Gomega) {
			for _, c := range s.clusters {
				dep := agentDeployment(s.ctx, g, c)
				g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal(s.in.NewImage), "cluster %s", c.cp.Name)
				g.Expect(inFlight(dep)).To(BeFalse(), "the agent Deployment of %s is rolled out", c.cp.Name)
				procs := c.kubelet.Processes()
				g.Expect(procs).To(HaveLen(1), "one agent, the new one, runs on %s", c.cp.Name)
				g.Expect(procs[0].Image).To(Equal(s.in.NewImage), "one agent, the new one, runs on %s", c.cp.Name)
				g.Expect(procs[0].Process.Output()).To(ContainSubstring(`"msg":"Agent running"`),
					"the new agent of %s has taken the leader lease over and runs", c.cp.Name)
				g.Expect(procs[0].Process.Output()).To(ContainSubstring(`"version":"%s"`, s.in.Versions[s.in.NewImage]),
					"the agent running on %s reports the new version", c.cp.Name)
			}
			g.Expect(readyAgentBundles(s.ctx, g, s.in.Admin)).To(HaveLen(len(s.clusters)))
		}, waitRollIn, time.Second)
		took := time.Since(start)
		stopSampling()
		<-sampled
		GinkgoWriter.Printf("Rolled %s to %d clusters in %s: %d samples, at most %d in flight at once (budget %d), never a cluster without an available agent: %t\n",
			s.in.NewImage, len(s.clusters), took.Round(time.Second), smp.samples, smp.maxInFlight, s.in.MaxInFlight, smp.noAgent == 0)
		// A sample reads ten Deployments: at least one a second however
		// loaded the machine, from before the offer to the end.
		Expect(smp.samples).To(BeNumerically(">=", max(5, int(took.Seconds()))), "the rollout was sampled all along")
		Expect(smp.maxInFlight).To(BeNumerically(">=", 1), "the sampler saw clusters in flight")
		Expect(smp.maxInFlight).To(BeNumerically("<=", s.in.MaxInFlight), "at most the budget in flight at once; worst sample: %v", smp.worst)
		Expect(smp.noAgent).To(BeZero(), "a rolling agent Deployment always has an available agent; %d samples found one without", smp.noAgent)

		Expect(helmReleases(s.ctx, Default, s.clusters)).To(Equal(s.releases), "the workload's releases have no new revision")
		Expect(readyBundleDeployments(s.ctx, Default, s.in.Admin, client.MatchingLabels{fleet.BundleNameLabel: appBundle})).To(HaveLen(len(s.clusters)))
	})
}

// settingsSteps: a token-registered Cluster's agent settings reach its
// Deployment, and redeployAgentGeneration restarts its agent.
func settingsSteps(s *agentUpgrade) {
	It("brings a token-registered Cluster's agent settings to its Deployment, and restarts its agent on redeployAgentGeneration", func() {
		c := s.clusters[0]
		cluster := &fleet.Cluster{}
		Expect(s.in.Admin.Get(s.ctx, types.NamespacedName{Namespace: workspace, Name: c.name}, cluster)).To(Succeed())
		patch := client.MergeFrom(cluster.DeepCopy())
		env := corev1.EnvVar{Name: "HTTPS_PROXY", Value: "http://proxy.example:3128"}
		res := corev1.ResourceRequirements{
			Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("20m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
			Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("200Mi")},
		}
		cluster.Spec.AgentEnvVars, cluster.Spec.AgentResources = []corev1.EnvVar{env}, &res
		Expect(s.in.Admin.Patch(s.ctx, cluster, patch)).To(Succeed())
		e2e.WaitFor("the agent Deployment of "+c.cp.Name+" to have the Cluster's env and resources, rolled out", func(g Gomega) {
			dep := agentDeployment(s.ctx, g, c)
			ctr := dep.Spec.Template.Spec.Containers[0]
			g.Expect(ctr.Env).To(ContainElements(env, corev1.EnvVar{Name: "GOMEMLIMIT", Value: "160MiB"}))
			g.Expect(ctr.Resources.Requests.Memory().String()).To(Equal("64Mi"))
			g.Expect(ctr.Resources.Limits.Memory().String()).To(Equal("200Mi"))
			g.Expect(inFlight(dep)).To(BeFalse())
			g.Expect(running(c)).To(ConsistOf(s.in.NewImage))
			g.Expect(readyAgentBundles(s.ctx, g, s.in.Admin)).To(HaveLen(len(s.clusters)))
		}, 2*time.Minute, time.Second)
		pods := &corev1.PodList{}
		Expect(c.local.List(s.ctx, pods, client.InNamespace(agentNS), client.MatchingLabels{"app": fleet.AgentName})).To(Succeed())
		Expect(pods.Items).To(HaveLen(1))
		Expect(pods.Items[0].Spec.Containers[0].Env).To(ContainElement(env), "the running agent's pod has the setting")

		// redeployAgentGeneration restarts the agent.
		Expect(s.in.Admin.Get(s.ctx, types.NamespacedName{Namespace: workspace, Name: c.name}, cluster)).To(Succeed())
		patch = client.MergeFrom(cluster.DeepCopy())
		cluster.Spec.RedeployAgentGeneration++
		Expect(s.in.Admin.Patch(s.ctx, cluster, patch)).To(Succeed())
		e2e.WaitFor("a new agent pod on "+c.cp.Name+" after redeployAgentGeneration was bumped", func(g Gomega) {
			now := &corev1.PodList{}
			g.Expect(c.local.List(s.ctx, now, client.InNamespace(agentNS), client.MatchingLabels{"app": fleet.AgentName})).To(Succeed())
			g.Expect(now.Items).To(HaveLen(1))
			g.Expect(now.Items[0].UID).NotTo(Equal(pods.Items[0].UID))
			g.Expect(inFlight(agentDeployment(s.ctx, g, c))).To(BeFalse())
			procs := c.kubelet.Processes()
			g.Expect(procs).To(HaveLen(1))
			g.Expect(procs[0].Pod).To(Equal(now.Items[0].Name))
			g.Expect(procs[0].Process.Output()).To(ContainSubstring(`"msg":"Agent running"`), "the restarted agent runs")
		}, 2*time.Minute, time.Second)
	})
}

// budgetSteps: a rollout of a version that cannot start stops at the
// budget, and a working version then completes it.
func budgetSteps(s *agentUpgrade) {
	It("stops a rollout at the budget when the new version cannot start, the old agents running; a working version then reaches every cluster", func() {
		s.stopManager()
		s.stopManager = s.in.StartManager(s.in.BrokenImage)
		broken := func(g Gomega) int {
			n := 0
			for _, c := range s.clusters {
				if agentDeployment(s.ctx, g, c).Spec.Template.Spec.Containers[0].Image == s.in.BrokenImage {
					n++
				}
			}
			return n
		}
		e2e.WaitFor("the budget's worth of clusters to get the version that cannot start", func(g Gomega) {
			g.Expect(broken(g)).To(Equal(s.in.MaxInFlight))
		}, 2*time.Minute, 500*time.Millisecond)
		// Long enough for several more batches had the rollout gone on.
		Consistently(func(g Gomega) {
			g.Expect(broken(g)).To(Equal(s.in.MaxInFlight), "no further cluster gets the version that cannot start")
			for _, c := range s.clusters {
				g.Expect(running(c)).To(ConsistOf(s.in.NewImage), "the working agent keeps running on %s", c.cp.Name)
			}
		}).WithTimeout(15 * time.Second).WithPolling(time.Second).Should(Succeed())

		s.stopManager()
		s.stopManager = s.in.StartManager(s.in.NewImage)
		e2e.WaitFor("every cluster to be back on the working version", func(g Gomega) {
			for _, c := range s.clusters {
				dep := agentDeployment(s.ctx, g, c)
				g.Expect(dep.Spec.Template.Spec.Containers[0].Image).To(Equal(s.in.NewImage), "cluster %s", c.cp.Name)
				g.Expect(inFlight(dep)).To(BeFalse(), "the agent Deployment of %s is rolled out", c.cp.Name)
				g.Expect(running(c)).To(ConsistOf(s.in.NewImage))
			}
			g.Expect(readyAgentBundles(s.ctx, g, s.in.Admin)).To(HaveLen(len(s.clusters)))
		}, 2*time.Minute, time.Second)
		Expect(helmReleases(s.ctx, Default, s.clusters)).To(Equal(s.releases), "the workload's releases have no new revision")
	})
}

// registeredClusters maps the identity of every Cluster whose agent has
// checked in to its name.
func registeredClusters(ctx context.Context, g Gomega, admin client.Client) map[string]string {
	list := &fleet.ClusterList{}
	g.Expect(admin.List(ctx, list, client.InNamespace(workspace))).To(Succeed())
	out := map[string]string{}
	for _, c := range list.Items {
		if agentbundle.Registered(&c) {
			out[c.Spec.ClientID] = c.Name
		}
	}
	return out
}

// readyBundleDeployments lists the Ready BundleDeployments matching opts.
func readyBundleDeployments(ctx context.Context, g Gomega, admin client.Client, opts ...client.ListOption) []string {
	list := &fleet.BundleDeploymentList{}
	g.Expect(admin.List(ctx, list, opts...)).To(Succeed())
	var ready []string
	for _, bd := range list.Items {
		if summary.State(&bd) == fleet.Ready || summary.State(&bd) == fleet.Modified {
			ready = append(ready, bd.Namespace+"/"+bd.Name)
		}
	}
	return ready
}

// readyAgentBundles lists the agent BundleDeployments that are at their
// Bundle's version and Ready.
func readyAgentBundles(ctx context.Context, g Gomega, admin client.Client) []string {
	bundles := &fleet.BundleList{}
	g.Expect(admin.List(ctx, bundles, client.InNamespace(workspace), client.MatchingLabels{fleet.AgentBundleLabel: "true"})).To(Succeed())
	hash := map[string]string{}
	for _, b := range bundles.Items {
		hash[b.Name] = b.Labels[fleet.AgentBundleHashLabel]
	}
	list := &fleet.BundleDeploymentList{}
	g.Expect(admin.List(ctx, list, client.MatchingLabels{fleet.AgentBundleLabel: "true"})).To(Succeed())
	var ready []string
	for _, bd := range list.Items {
		st := summary.State(&bd)
		if bd.Labels[fleet.AgentBundleHashLabel] == hash[bd.Name] && (st == fleet.Ready || st == fleet.Modified) {
			ready = append(ready, bd.Namespace+"/"+bd.Name)
		}
	}
	return ready
}

func agentDeployment(ctx context.Context, g Gomega, c *agentCluster) *appsv1.Deployment {
	dep := &appsv1.Deployment{}
	g.Expect(c.local.Get(ctx, types.NamespacedName{Namespace: agentNS, Name: fleet.AgentName}, dep)).To(Succeed())
	return dep
}

// running lists the images of the agent processes running on a cluster.
func running(c *agentCluster) []string {
	procs := c.kubelet.Processes()
	out := make([]string, 0, len(procs))
	for _, p := range procs {
		out = append(out, p.Image)
	}
	return out
}

// inFlight tells whether an agent Deployment is moving to a new version or
// not available: as the agent's own readiness check judges a Deployment,
// its spec not yet observed, not every replica updated and available, or
// pods of an old version still there.
func inFlight(d *appsv1.Deployment) bool {
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	st := d.Status
	return st.ObservedGeneration < d.Generation || st.UpdatedReplicas < want || st.Replicas > st.UpdatedReplicas || st.AvailableReplicas < want
}

// helmReleases lists, per cluster, the workload's Helm release records: a
// new revision of a release would add one.
func helmReleases(ctx context.Context, g Gomega, clusters []*agentCluster) map[string][]string {
	out := map[string][]string{}
	for _, c := range clusters {
		list := &corev1.SecretList{}
		g.Expect(c.local.List(ctx, list, client.InNamespace(appNS), client.MatchingLabels{"owner": "helm"})).To(Succeed())
		names := make([]string, 0, len(list.Items))
		for _, s := range list.Items {
			names = append(names, s.Name+"@"+s.ResourceVersion)
		}
		slices.Sort(names)
		g.Expect(names).NotTo(BeEmpty(), "cluster %s has the workload's release", c.cp.Name)
		out[c.cp.Name] = names
	}
	return out
}

// sampler reads every cluster's agent Deployment again and again and keeps
// the most that were in flight at once.
//
// One sweep reads the clusters one after the other, so the clusters it
// finds in flight were not all in flight at one moment: on a loaded machine
// one may finish and the next start during the sweep. A cluster counts as
// in flight in a sample when two consecutive sweeps found it so; a cluster
// rolls once, so it was in flight all along between its two reads, and the
// clusters two sweeps agree on were all in flight at one moment (the later
// of their first reads).
type sampler struct {
	mu          sync.Mutex
	samples     int
	maxInFlight int
	worst       []string
	noAgent     int
}

func (s *sampler) run(ctx context.Context, clusters []*agentCluster, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	var last map[string]bool
	for {
		var flying []string
		now := map[string]bool{}
		noAgent, complete := false, true
		for _, c := range clusters {
			dep := &appsv1.Deployment{}
			if err := c.local.Get(ctx, types.NamespacedName{Namespace: agentNS, Name: fleet.AgentName}, dep); err != nil {
				complete = false
				break
			}
			if inFlight(dep) {
				now[c.cp.Name] = true
				if last[c.cp.Name] {
					flying = append(flying, fmt.Sprintf("%s(%s gen %d/%d updated %d replicas %d available %d)", c.cp.Name,
						strings.TrimPrefix(dep.Spec.Template.Spec.Containers[0].Image, "registry.test/"), dep.Status.ObservedGeneration, dep.Generation,
						dep.Status.UpdatedReplicas, dep.Status.Replicas, dep.Status.AvailableReplicas))
				}
			}
			if dep.Status.AvailableReplicas == 0 {
				noAgent = true
			}
		}
		if complete {
			last = now
			s.mu.Lock()
			s.samples++
			if len(flying) > s.maxInFlight {
				s.maxInFlight, s.worst = len(flying), flying
			}
			if noAgent {
				s.noAgent++
			}
			s.mu.Unlock()
		} else {
			last = nil
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
