package capi

import (
	"context"
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/capi"
	"github.com/gitfleet/fleet/controllers/clusterimport"
	"github.com/gitfleet/fleet/internal/checkin"
	"github.com/gitfleet/fleet/internal/kubeconfig"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/test/framework"
)

// remoteTimeout bounds each call of the import controller to a workload
// cluster.
const remoteTimeout = clusterimport.DefaultRemoteTimeout

func (e *env) newBundle(name string, selector map[string]string) *fleet.Bundle {
	GinkgoHelper()
	b := &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: fleet.BundleSpec{
			Resources: []fleet.BundleResource{{Name: "cm.yaml", Content: "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: " + name + "}\n"}},
			Targets:   []fleet.BundleTarget{{Name: "sel", ClusterSelector: &metav1.LabelSelector{MatchLabels: selector}}},
		},
	}
	Expect(e.admin.Create(e.ctx, b)).To(Succeed())
	return b
}

// deployedTo tells whether bundle b has a BundleDeployment for cluster.
func (e *env) deployedTo(b *fleet.Bundle, cluster string) func() bool {
	return func() bool {
		err := e.admin.Get(e.ctx, types.NamespacedName{Namespace: names.ClusterNamespace(ns, cluster), Name: b.Name}, &fleet.BundleDeployment{})
		return err == nil
	}
}

func (e *env) setPaused(c *clusterv1.Cluster, paused bool) {
	GinkgoHelper()
	Expect(e.admin.Patch(e.ctx, c, client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"spec":{"paused":%t}}`, paused)))).To(Succeed())
}

func (e *env) kubeconfigFor(i int) ([]byte, error) {
	return kubeconfig.FromREST(e.workloads[i].Config, e.workloads[i].Name)
}

// enrollment is what the steps of EnrollmentSpec share: the clusters they
// build on, and the intervals that follow the suite's stale-agent time.
type enrollment struct {
	*env
	staleAfter, checkinInterval, checkInterval time.Duration
	alpha                                      *clusterv1.Cluster
	alphaUID                                   types.UID // the fleet Cluster's
	k0                                         *kubelet
	w0Local                                    client.Client
	enrolled                                   time.Time
	secretsAt                                  time.Time
}

// EnrollmentSpec plays Cluster API against the manager: it creates Cluster
// API Clusters, marks their control planes initialized and writes their
// kubeconfig Secrets, runs the agents the manager installs with a stand-in
// kubelet, and checks enrollment, targeting by the copied labels, healing,
// adoption of a token-registered cluster, errors, pausing, opting out and
// deletion. The specs build on each other (one enrolled cluster, then its
// agent, ...): call it in an Ordered container, with ContinueOnFailure so
// that one run shows every problem.
func EnrollmentSpec(ctx context.Context, inputGetter func() SpecInput) {
	s := &enrollment{env: &env{ctx: ctx}}

	BeforeAll(func() {
		input := inputGetter()
		input.validate("EnrollmentSpec")
		s.set(input)
		// The agent check-in and the manager's periodic check follow the
		// stale-agent time: a third of it each.
		s.staleAfter = input.ImportStaleAfter
		s.checkinInterval, s.checkInterval = s.staleAfter/3, s.staleAfter/3
		Expect(s.admin.Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
		s.w0Local = s.localClient(s.workloads[0])
	})
	AfterAll(s.stopKubelets)

	enrollSteps(s)
	targetAndHealSteps(s)
	adoptAndErrorSteps(s)
	pauseOptOutAndDeleteSteps(s)
}

// enrollSteps: a cluster enrolls once its control plane is initialized, and
// its agent registers onto the Cluster made for it.
func enrollSteps(s *enrollment) {
	It("does not enroll a cluster whose control plane is not initialized", func() {
		s.alpha = s.createCAPICluster(capiCluster{name: "alpha", workload: s.workloads[0], class: "quick-start",
			labels: map[string]string{"env": "dev", "tier": "web"}})
		s.writeKubeconfigSecret(ns, "alpha", s.workloads[0], nil)
		Eventually(s.agentReady(ns, "alpha"), 10*time.Second, 100*time.Millisecond).Should(haveReason(metav1.ConditionFalse, fleet.ReasonWaitingForControlPlane))
		Consistently(func() bool { _, err := s.getFleetCluster(ns, "alpha"); return apierrors.IsNotFound(err) }, 2*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(s.admin.Get(s.ctx, client.ObjectKeyFromObject(s.alpha), s.alpha)).To(Succeed())
		Expect(s.alpha.Finalizers).NotTo(ContainElement(fleet.CAPIEnrollmentFinalizer), "nothing to clean up yet")
	})

	It("enrolls it within seconds once initialized and installs the agent downstream", func() {
		s.secretsAt = time.Now()
		s.initialize(s.alpha)
		var fc *fleet.Cluster
		Eventually(func() error { var err error; fc, err = s.getFleetCluster(ns, "alpha"); return err }, 10*time.Second, 50*time.Millisecond).Should(Succeed())
		s.enrolled = time.Now()
		s.alphaUID = fc.UID
		Expect(fc.Annotations).To(HaveKeyWithValue(capi.CAPIClusterUIDAnnotation, string(s.alpha.UID)), "enrolled for the Cluster API Cluster")
		Expect(fc.OwnerReferences).To(BeEmpty(), "no owner reference for a garbage collector to follow on a move")
		Expect(fc.Spec.KubeConfigSecret).To(Equal("alpha-kubeconfig"))
		Expect(fc.Labels).To(Equal(map[string]string{"env": "dev", "tier": "web", capi.ClusterClassLabel: "quick-start", capi.ClusterClassNamespaceLabel: ns}))

		uid := s.kubeSystemUID(s.workloads[0])
		Eventually(s.imported(ns, "alpha"), 20*time.Second, 50*time.Millisecond).Should(Equal(fleet.ReasonApplied))
		applied := time.Since(s.secretsAt)
		for _, obj := range []client.Object{&appsv1.Deployment{}, &corev1.Secret{}, &corev1.ConfigMap{}} {
			name := fleet.AgentName
			if _, ok := obj.(*corev1.Secret); ok {
				name = fleet.AgentBootstrapSecretName
			}
			Expect(s.w0Local.Get(s.ctx, types.NamespacedName{Namespace: fleet.DefaultSystemNamespace, Name: name}, obj)).To(Succeed(), "%T %s downstream", obj, name)
		}
		cm := &corev1.ConfigMap{}
		Expect(s.w0Local.Get(s.ctx, types.NamespacedName{Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentName}, cm)).To(Succeed())
		cfg, err := agentinstall.ReadConfig(cm)
		Expect(err).NotTo(HaveOccurred())
		Expect(cfg.ClientID).To(Equal(uid), "the identity is the workload's kube-system UID")
		Expect(cfg.Labels).To(HaveKeyWithValue("env", "dev"))
		Expect(cfg.CheckinInterval).To(Equal(s.checkinInterval.String()))

		Expect(s.getFleetCluster(ns, "alpha")).To(HaveField("Spec.ClientID", uid))
		Expect(s.agentReady(ns, "alpha")()).To(haveReason(metav1.ConditionFalse, fleet.ReasonInstalling))
		msg := fmt.Sprintf("Enrolled in %s, agent objects applied %s after the control plane was initialized",
			s.enrolled.Sub(s.secretsAt).Round(time.Millisecond), applied.Round(time.Millisecond))
		AddReportEntry("enroll-one", msg)
		fmt.Println(msg)
	})

	It("registers the agent that runs from those objects onto the same Cluster", func() {
		s.k0 = s.startKubelet(s.workloads[0], fleet.DefaultSystemNamespace)
		Eventually(s.imported(ns, "alpha"), 60*time.Second, 100*time.Millisecond).Should(Equal(fleet.ReasonAgentRegistered), func() string { return s.k0.Output() })
		fc, err := s.getFleetCluster(ns, "alpha")
		Expect(err).NotTo(HaveOccurred())
		Expect(fc.UID).To(Equal(s.alphaUID), "the same Cluster object")
		// The check-in reaches the import controller and the Cluster's
		// lastSeen from the agent's Lease, each on its own.
		Eventually(func() bool {
			fc, err = s.getFleetCluster(ns, "alpha")
			Expect(err).NotTo(HaveOccurred())
			return fc.Status.Agent.LastSeen.IsZero()
		}, 10*time.Second, 100*time.Millisecond).Should(BeFalse())
		Expect(s.clustersWithClientID(s.kubeSystemUID(s.workloads[0]))()).To(ConsistOf(ns+"/alpha"), "no second Cluster")
		Expect(fc.Status.AgentDeployedGeneration).NotTo(BeNil())
		Expect(fc.Status.APIServerURL).To(Equal(s.upstream.Config.Host))
		Expect(fc.Status.APIServerCAHash).To(Equal(clusterimport.CAHash(s.upstream.Config.CAData)))

		Eventually(s.agentReady(ns, "alpha"), 10*time.Second, 100*time.Millisecond).Should(haveReason(metav1.ConditionTrue, fleet.ReasonRegistered))
		Eventually(s.notFound(&fleet.ClusterRegistrationToken{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.ImportToken("alpha")}}),
			10*time.Second, 100*time.Millisecond).Should(BeTrue(), "the import token goes once the agent is registered")
		err = s.w0Local.Get(s.ctx, types.NamespacedName{Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentBootstrapSecretName}, &corev1.Secret{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the agent forgot the token: %v", err)
		Expect(s.k0.Starts()).To(Equal(1))
	})

	It("keeps a ClusterGroup for its ClusterClass, holding the cluster (--capi-cluster-class-groups)", func() {
		grp := &fleet.ClusterGroup{}
		Eventually(func(g Gomega) {
			g.Expect(s.admin.Get(s.ctx, types.NamespacedName{Namespace: ns, Name: "quick-start"}, grp)).To(Succeed())
			g.Expect(grp.Labels).To(HaveKeyWithValue(capi.ClassGroupLabel, "true"))
			g.Expect(grp.Status.ClusterCount).To(Equal(1), "the cluster group controller counts the cluster of the class")
		}, 20*time.Second, 100*time.Millisecond).Should(Succeed())
		Expect(grp.Spec.Selector.MatchLabels).To(Equal(map[string]string{capi.ClusterClassLabel: "quick-start", capi.ClusterClassNamespaceLabel: ns}))
	})
}

// targetAndHealSteps: the enrolled cluster stays Ready through its agent,
// gets Bundles by its Cluster API labels, and is healed when its agent is
// deleted or stops checking in.
func targetAndHealSteps(s *enrollment) {
	It("keeps FleetAgentReady True while the agent checks in, though the manager cannot reach the workload API", func() {
		// The manager's way in (the kubeconfig) now leads nowhere, as during
		// a control-plane rollout or behind a firewall that lets only the
		// agent's outgoing connections through.
		secret := &corev1.Secret{}
		Expect(s.admin.Get(s.ctx, types.NamespacedName{Namespace: ns, Name: capi.KubeconfigSecretName("alpha")}, secret)).To(Succeed())
		reachable := secret.Data[fleet.KubeConfigSecretValueKey]
		dead := rest.CopyConfig(s.workloads[0].Config)
		dead.Host = "https://127.0.0.1:1"
		value, err := kubeconfig.FromREST(dead, "alpha")
		Expect(err).NotTo(HaveOccurred())
		secret.Data[fleet.KubeConfigSecretValueKey] = value
		Expect(s.admin.Update(s.ctx, secret)).To(Succeed())
		restore := func() {
			Expect(s.admin.Get(s.ctx, client.ObjectKeyFromObject(secret), secret)).To(Succeed())
			secret.Data[fleet.KubeConfigSecretValueKey] = reachable
			Expect(s.admin.Update(s.ctx, secret)).To(Succeed())
		}
		DeferCleanup(restore)

		// FleetAgentReady is sampled all along: it may never leave True.
		sample := func() {
			GinkgoHelper()
			Expect(s.agentReady(ns, "alpha")()).To(haveReason(metav1.ConditionTrue, fleet.ReasonRegistered), "FleetAgentReady while the workload API is unreachable")
		}
		Eventually(func() *metav1.Condition { sample(); return s.importedCondition(ns, "alpha") }, s.checkInterval+3*remoteTimeout+20*time.Second, 200*time.Millisecond).
			Should(haveReason(metav1.ConditionFalse, fleet.ReasonClusterUnreachable), "the manager sees the workload API unreachable")
		// And the agent goes on checking in: its Lease is renewed past this point.
		unreachableAt := time.Now()
		Eventually(func() time.Time {
			sample()
			fc, err := s.getFleetCluster(ns, "alpha")
			Expect(err).NotTo(HaveOccurred())
			last, err := checkin.LastOf(s.ctx, s.admin, fc)
			Expect(err).NotTo(HaveOccurred())
			return last
		}, s.checkinInterval+20*time.Second, 200*time.Millisecond).Should(BeTemporally(">", unreachableAt.Truncate(time.Second)), "a check-in while unreachable")
		Consistently(func(g Gomega) {
			g.Expect(s.agentReady(ns, "alpha")()).To(haveReason(metav1.ConditionTrue, fleet.ReasonRegistered))
		}, 3*time.Second, 200*time.Millisecond).Should(Succeed(), "FleetAgentReady while the workload API is unreachable")

		restore()
		Eventually(s.imported(ns, "alpha"), s.checkInterval+3*remoteTimeout+20*time.Second, 200*time.Millisecond).Should(Equal(fleet.ReasonAgentRegistered))
		sample()
	})

	It("targets Bundles by the labels copied from Cluster API and retargets when they change", func() {
		dev := s.newBundle("dev-apps", map[string]string{"env": "dev"})
		prod := s.newBundle("prod-apps", map[string]string{"env": "prod"})
		byClass := s.newBundle("quick-start-apps", map[string]string{capi.ClusterClassLabel: "quick-start"})
		Eventually(s.deployedTo(dev, "alpha"), 20*time.Second, 100*time.Millisecond).Should(BeTrue())
		Eventually(s.deployedTo(byClass, "alpha"), 20*time.Second, 100*time.Millisecond).Should(BeTrue())
		Expect(s.deployedTo(prod, "alpha")()).To(BeFalse())

		By("relabelling the Cluster API Cluster: env changes, tier goes")
		starts := s.k0.Starts()
		Expect(s.admin.Get(s.ctx, client.ObjectKeyFromObject(s.alpha), s.alpha)).To(Succeed())
		patch := client.MergeFrom(s.alpha.DeepCopy())
		s.alpha.Labels = map[string]string{"env": "prod"}
		Expect(s.admin.Patch(s.ctx, s.alpha, patch)).To(Succeed())
		Eventually(func() map[string]string {
			fc, _ := s.getFleetCluster(ns, "alpha")
			return fc.Labels
		}, 10*time.Second, 100*time.Millisecond).Should(Equal(map[string]string{"env": "prod", capi.ClusterClassLabel: "quick-start", capi.ClusterClassNamespaceLabel: ns}))
		Eventually(s.deployedTo(prod, "alpha"), 20*time.Second, 100*time.Millisecond).Should(BeTrue())
		Eventually(s.deployedTo(dev, "alpha"), 20*time.Second, 100*time.Millisecond).Should(BeFalse())
		Expect(s.deployedTo(byClass, "alpha")()).To(BeTrue())

		By("the agent's ConfigMap follows, without restarting the agent")
		Eventually(func() map[string]string {
			cm := &corev1.ConfigMap{}
			if err := s.w0Local.Get(s.ctx, types.NamespacedName{Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentName}, cm); err != nil {
				return nil
			}
			cfg, _ := agentinstall.ReadConfig(cm)
			return cfg.Labels
		}, 10*time.Second, 100*time.Millisecond).Should(HaveKeyWithValue("env", "prod"))
		Consistently(s.k0.Starts, time.Second, 100*time.Millisecond).Should(Equal(starts))
		Expect(s.imported(ns, "alpha")()).To(Equal(fleet.ReasonAgentRegistered))
	})

	It("reinstalls the agent when its Deployment is deleted downstream", func() {
		starts := s.k0.Starts()
		Expect(s.w0Local.Delete(s.ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentName}})).To(Succeed())
		deleted := time.Now()
		Eventually(func() error {
			return s.w0Local.Get(s.ctx, types.NamespacedName{Namespace: fleet.DefaultSystemNamespace, Name: fleet.AgentName}, &appsv1.Deployment{})
		}, s.checkInterval+s.staleAfter, 100*time.Millisecond).Should(Succeed())
		msg := fmt.Sprintf("Deleted agent Deployment reinstalled after %s (check interval %s)", time.Since(deleted).Round(time.Millisecond), s.checkInterval)
		AddReportEntry("heal-deleted", msg)
		fmt.Println(msg)
		Eventually(s.k0.Starts, 10*time.Second, 100*time.Millisecond).Should(BeNumerically(">", starts))
		Eventually(s.imported(ns, "alpha"), 30*time.Second, 100*time.Millisecond).Should(Equal(fleet.ReasonAgentRegistered), func() string { return s.k0.Output() })
		Eventually(s.agentReady(ns, "alpha"), 10*time.Second, 100*time.Millisecond).Should(haveReason(metav1.ConditionTrue, fleet.ReasonRegistered))
		Expect(s.clustersWithClientID(s.kubeSystemUID(s.workloads[0]))()).To(ConsistOf(ns + "/alpha"))
	})

	It("restarts an agent that stopped checking in", func() {
		starts := s.k0.Starts()
		s.k0.hang()
		hung := time.Now()
		By("the manager notices the silence and restarts the agent with a fresh token")
		Eventually(s.k0.Starts, s.staleAfter+2*s.checkInterval+10*time.Second, 200*time.Millisecond).Should(BeNumerically(">", starts))
		healed := time.Since(hung)
		Eventually(s.imported(ns, "alpha"), 30*time.Second, 100*time.Millisecond).Should(Equal(fleet.ReasonAgentRegistered), func() string { return s.k0.Output() })
		Eventually(s.agentReady(ns, "alpha"), 10*time.Second, 100*time.Millisecond).Should(haveReason(metav1.ConditionTrue, fleet.ReasonRegistered))
		fc, err := s.getFleetCluster(ns, "alpha")
		Expect(err).NotTo(HaveOccurred())
		Expect(fc.UID).To(Equal(s.alphaUID))
		msg := fmt.Sprintf("Hung agent restarted after %s (stale after %s)", healed.Round(time.Millisecond), s.staleAfter)
		AddReportEntry("heal-stale", msg)
		fmt.Println(msg)
	})
}

// adoptAndErrorSteps: a token-registered cluster is adopted, and a bad
// kubeconfig or a stopped API server is reported on its Clusters alone.
func adoptAndErrorSteps(s *enrollment) {
	It("adopts the Cluster of a workload cluster that registered by token before", func() {
		w1Local := s.localClient(s.workloads[1])
		By("registering workload-1 by token, as a person would")
		tokenYAML, err := framework.Run("fleet", "install", "agent-token", "-k", s.upstream.Kubeconfig, "-g", ns)
		Expect(err).NotTo(HaveOccurred())
		Expect(framework.ApplyYAML(s.ctx, w1Local, tokenYAML)).To(Succeed())
		configYAML, err := framework.Run("fleet", "install", "agent-config", "-l", "legacy=yes")
		Expect(err).NotTo(HaveOccurred())
		Expect(framework.ApplyYAML(s.ctx, w1Local, configYAML)).To(Succeed())
		k1 := s.startKubelet(s.workloads[1], fleet.DefaultSystemNamespace)
		uid := s.kubeSystemUID(s.workloads[1])
		tokenCluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.ClusterForClientID(uid)}}
		Eventually(func() error { return s.admin.Get(s.ctx, client.ObjectKeyFromObject(tokenCluster), tokenCluster) },
			60*time.Second, 200*time.Millisecond).Should(Succeed(), func() string { return k1.Output() })
		Expect(tokenCluster.Labels).To(HaveKeyWithValue("legacy", "yes"))
		// Fully registered: the agent stored its credential and checks in.
		Eventually(func() bool {
			Expect(s.admin.Get(s.ctx, client.ObjectKeyFromObject(tokenCluster), tokenCluster)).To(Succeed())
			return tokenCluster.Status.Agent.LastSeen.IsZero()
		}, 30*time.Second, 100*time.Millisecond).Should(BeFalse(), func() string { return k1.Output() })
		starts := k1.Starts()

		By("enrolling it through Cluster API")
		beta := s.createCAPICluster(capiCluster{name: "beta", workload: s.workloads[1], labels: map[string]string{"env": "staging"}})
		s.initialize(beta)
		s.writeKubeconfigSecret(ns, "beta", s.workloads[1], nil)
		Eventually(s.notFound(tokenCluster), 30*time.Second, 100*time.Millisecond).Should(BeTrue(), "the token-registered Cluster is replaced")
		Eventually(k1.Starts, 30*time.Second, 100*time.Millisecond).Should(BeNumerically(">", starts), "the install restarts the agent")
		By("the restarted agent finds its credential revoked and registers again with the import token")
		Eventually(func(g Gomega) {
			out := k1.Output()
			g.Expect(out).NotTo(ContainSubstring("panic:"),
				"fleet-agent crashed re-registering after its stored credential was revoked (agent/join attempt() logs err.Error() of the outer, nil err):\n%s", out)
			g.Expect(s.imported(ns, "beta")()).To(Equal(fleet.ReasonAgentRegistered), out)
		}, 60*time.Second, 100*time.Millisecond).Should(Succeed())
		Expect(s.clustersWithClientID(uid)()).To(ConsistOf(ns+"/beta"), "one Cluster per identity")
		fc, err := s.getFleetCluster(ns, "beta")
		Expect(err).NotTo(HaveOccurred())
		Expect(fc.Labels).To(HaveKeyWithValue("legacy", "yes"), "labels of the adopted Cluster carry over")
		Expect(fc.Labels).To(HaveKeyWithValue("env", "staging"))
		Eventually(s.agentReady(ns, "beta"), 10*time.Second, 100*time.Millisecond).Should(haveReason(metav1.ConditionTrue, fleet.ReasonRegistered))
	})

	It("reports a garbage kubeconfig on both Clusters and leaves the others alone", func() {
		broken := s.createCAPICluster(capiCluster{name: "broken", workload: s.workloads[0]})
		s.initialize(broken)
		s.writeKubeconfigSecret(ns, "broken", s.workloads[0], []byte("this is: [not a kubeconfig"))
		Eventually(func() *metav1.Condition { return s.importedCondition(ns, "broken") }, 20*time.Second, 100*time.Millisecond).
			Should(haveReason(metav1.ConditionFalse, fleet.ReasonKubeconfigInvalid))
		Eventually(s.agentReady(ns, "broken"), 10*time.Second, 100*time.Millisecond).Should(And(
			haveReason(metav1.ConditionFalse, fleet.ReasonFailed), HaveField("Message", ContainSubstring(fleet.ReasonKubeconfigInvalid))))
		fmt.Println("Garbage kubeconfig:", s.agentReady(ns, "broken")().Message)
		Consistently(s.imported(ns, "alpha"), 3*time.Second, 200*time.Millisecond).Should(Equal(fleet.ReasonAgentRegistered))

		By("fixing the Secret fixes the import (Cluster API rotates it in place)")
		secret := &corev1.Secret{}
		Expect(s.admin.Get(s.ctx, types.NamespacedName{Namespace: ns, Name: "broken-kubeconfig"}, secret)).To(Succeed())
		kc, err := s.kubeconfigFor(2)
		Expect(err).NotTo(HaveOccurred())
		secret.Data[fleet.KubeConfigSecretValueKey] = kc
		Expect(s.admin.Update(s.ctx, secret)).To(Succeed())
		Eventually(s.imported(ns, "broken"), 20*time.Second, 100*time.Millisecond).Should(Equal(fleet.ReasonApplied))
	})

	It("reports a stopped API server as unreachable and leaves the others alone", func() {
		// broken now points at workload-2, with its agent objects applied.
		Expect(s.workloads[2].APIServer().Stop()).To(Succeed())
		Eventually(func() *metav1.Condition { return s.importedCondition(ns, "broken") }, s.checkInterval+3*remoteTimeout+10*time.Second, 200*time.Millisecond).
			Should(haveReason(metav1.ConditionFalse, fleet.ReasonClusterUnreachable))
		Eventually(s.agentReady(ns, "broken"), 10*time.Second, 100*time.Millisecond).Should(And(
			haveReason(metav1.ConditionFalse, fleet.ReasonFailed), HaveField("Message", ContainSubstring(fleet.ReasonClusterUnreachable))))
		fmt.Println("Stopped API server:", s.agentReady(ns, "broken")().Message)
		Consistently(s.imported(ns, "alpha"), 3*time.Second, 200*time.Millisecond).Should(Equal(fleet.ReasonAgentRegistered))
		Expect(s.agentReady(ns, "alpha")()).To(haveReason(metav1.ConditionTrue, fleet.ReasonRegistered))
	})
}

// pauseOptOutAndDeleteSteps: paused and opted-out clusters are left alone,
// and a deleted Cluster API Cluster takes its fleet Cluster with it.
func pauseOptOutAndDeleteSteps(s *enrollment) {
	It("leaves a paused cluster alone", func() {
		delta := s.createCAPICluster(capiCluster{name: "delta", workload: s.workloads[0], paused: true,
			labels:      map[string]string{"env": "qa"},
			annotations: map[string]string{capi.AgentNamespaceAnnotation: "fleet-delta", capi.ClientIDAnnotation: "delta"}})
		s.initialize(delta)
		s.writeKubeconfigSecret(ns, "delta", s.workloads[0], nil)
		Consistently(func() bool { _, err := s.getFleetCluster(ns, "delta"); return apierrors.IsNotFound(err) }, 2*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(s.agentReady(ns, "delta")()).To(BeNil())

		By("unpausing enrolls it")
		s.setPaused(delta, false)
		Eventually(s.imported(ns, "delta"), 20*time.Second, 100*time.Millisecond).Should(Equal(fleet.ReasonApplied))
		fc, err := s.getFleetCluster(ns, "delta")
		Expect(err).NotTo(HaveOccurred())
		Expect(fc.Spec.AgentNamespace).To(Equal("fleet-delta"))
		Expect(fc.Spec.ClientID).To(Equal("delta"))
		Expect(s.w0Local.Get(s.ctx, types.NamespacedName{Namespace: "fleet-delta", Name: fleet.AgentName}, &appsv1.Deployment{})).To(Succeed())

		By("pausing freezes the labels")
		s.setPaused(delta, true)
		Expect(s.admin.Get(s.ctx, client.ObjectKeyFromObject(delta), delta)).To(Succeed())
		patch := client.MergeFrom(delta.DeepCopy())
		delta.Labels["env"] = "frozen"
		Expect(s.admin.Patch(s.ctx, delta, patch)).To(Succeed())
		Consistently(func() string { fc, _ := s.getFleetCluster(ns, "delta"); return fc.Labels["env"] }, 2*time.Second, 200*time.Millisecond).Should(Equal("qa"))
		s.setPaused(delta, false)
		Eventually(func() string { fc, _ := s.getFleetCluster(ns, "delta"); return fc.Labels["env"] }, 10*time.Second, 100*time.Millisecond).Should(Equal("frozen"))
	})

	It("leaves opted-out clusters alone, by label on the cluster or its namespace", func() {
		eps := s.createCAPICluster(capiCluster{name: "epsilon", workload: s.workloads[0],
			labels:      map[string]string{capi.EnrollLabel: "false"},
			annotations: map[string]string{capi.AgentNamespaceAnnotation: "fleet-epsilon", capi.ClientIDAnnotation: "epsilon"}})
		s.initialize(eps)
		s.writeKubeconfigSecret(ns, "epsilon", s.workloads[0], nil)

		const optOutNS = "capi-opted-out"
		Expect(s.admin.Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: optOutNS, Labels: map[string]string{capi.EnrollLabel: "false"}}})).To(Succeed())
		zeta := s.createCAPICluster(capiCluster{name: "zeta", namespace: optOutNS, workload: s.workloads[0],
			annotations: map[string]string{capi.AgentNamespaceAnnotation: "fleet-zeta", capi.ClientIDAnnotation: "zeta"}})
		s.initialize(zeta)
		s.writeKubeconfigSecret(optOutNS, "zeta", s.workloads[0], nil)
		Consistently(func() bool {
			_, err1 := s.getFleetCluster(ns, "epsilon")
			_, err2 := s.getFleetCluster(optOutNS, "zeta")
			return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2)
		}, 2*time.Second, 200*time.Millisecond).Should(BeTrue())
		Expect(s.agentReady(ns, "epsilon")()).To(BeNil())
		Expect(s.agentReady(optOutNS, "zeta")()).To(BeNil())

		By("removing the namespace label enrolls its clusters")
		nsObj := &corev1.Namespace{}
		Expect(s.admin.Get(s.ctx, types.NamespacedName{Name: optOutNS}, nsObj)).To(Succeed())
		delete(nsObj.Labels, capi.EnrollLabel)
		Expect(s.admin.Update(s.ctx, nsObj)).To(Succeed())
		Eventually(s.imported(optOutNS, "zeta"), 20*time.Second, 100*time.Millisecond).Should(Equal(fleet.ReasonApplied))

		By("opting out an enrolled cluster un-enrolls it: the agent is removed downstream, the fleet Cluster deleted")
		Expect(s.w0Local.Get(s.ctx, types.NamespacedName{Namespace: "fleet-zeta", Name: fleet.AgentName}, &appsv1.Deployment{})).To(Succeed())
		Expect(s.admin.Get(s.ctx, client.ObjectKeyFromObject(zeta), zeta)).To(Succeed())
		Expect(zeta.Finalizers).To(ContainElement(fleet.CAPIEnrollmentFinalizer))
		patch := client.MergeFrom(zeta.DeepCopy())
		zeta.Labels = map[string]string{capi.EnrollLabel: "false"}
		Expect(s.admin.Patch(s.ctx, zeta, patch)).To(Succeed())
		Eventually(func() []string {
			Expect(s.admin.Get(s.ctx, client.ObjectKeyFromObject(zeta), zeta)).To(Succeed())
			return zeta.Finalizers
		}, 10*time.Second, 100*time.Millisecond).ShouldNot(ContainElement(fleet.CAPIEnrollmentFinalizer))
		Eventually(s.agentReady(optOutNS, "zeta"), 10*time.Second, 100*time.Millisecond).Should(BeNil())
		Eventually(func() bool { _, err := s.getFleetCluster(optOutNS, "zeta"); return apierrors.IsNotFound(err) }, 30*time.Second, 100*time.Millisecond).
			Should(BeTrue(), "the fleet Cluster deleted")
		err := s.w0Local.Get(s.ctx, types.NamespacedName{Namespace: "fleet-zeta", Name: fleet.AgentName}, &appsv1.Deployment{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the agent removed downstream first: %v", err)
	})

	It("deletes the fleet Cluster with its Cluster API Cluster", func() {
		Expect(s.admin.Delete(s.ctx, s.alpha)).To(Succeed())
		Eventually(func() bool { _, err := s.getFleetCluster(ns, "alpha"); return apierrors.IsNotFound(err) }, 20*time.Second, 100*time.Millisecond).Should(BeTrue())
		Eventually(s.notFound(&clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "alpha"}}), 10*time.Second, 100*time.Millisecond).Should(BeTrue())
		Eventually(s.notFound(&fleet.ClusterRegistrationToken{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: names.ImportToken("alpha")}}),
			10*time.Second, 100*time.Millisecond).Should(BeTrue())
		_, err := s.getFleetCluster(ns, "beta")
		Expect(err).NotTo(HaveOccurred(), "other clusters stay")
	})
}
