package agent

import (
	"context"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	agentupstream "github.com/gitfleet/fleet/agent/upstream"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/test/framework"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// LocalClusterSpec is Fleet's quickstart on the manager's own cluster: the
// manager (with its defaults, and exactly its generated rights) keeps the
// Cluster fleet-local/local and installs its agent into the cluster it runs
// in; the spec runs that agent from what the install wrote, as the kubelet
// would; a GitRepo in fleet-local without targets then lands there through
// the ClusterGroup default, and the agent holds only an agent's rights
// upstream. Call it in an Ordered container.
func LocalClusterSpec(ctx context.Context, inputGetter func() SpecInput) {
	var (
		admin    client.Client
		local    *fleet.Cluster
		agent    *framework.Process
		upstream SpecInput
	)
	localKey := types.NamespacedName{Namespace: fleet.LocalWorkspace, Name: fleet.LocalClusterName}
	BeforeAll(func() {
		upstream = inputGetter()
		upstream.validate("LocalClusterSpec")
		admin = upstream.Admin
	})
	AfterAll(func() {
		if agent != nil {
			agent.Stop()
		}
	})

	It("installs the local agent into the manager's own cluster, with the manager's generated rights", func() {
		e2e.WaitFor("the manager to apply the local Cluster's agent", func(g Gomega) {
			local = &fleet.Cluster{}
			g.Expect(admin.Get(ctx, localKey, local)).To(Succeed())
			g.Expect(local.Labels).To(HaveKeyWithValue("name", "local"))
			cond := conditions.Get(local, fleet.ConditionImported)
			g.Expect(cond).NotTo(BeNil())
			g.Expect(cond.Reason).To(BeElementOf(fleet.ReasonApplied, fleet.ReasonAgentRegistered), cond.Message)
		}, time.Minute, 250*time.Millisecond)

		var err error
		agent, err = framework.Start(upstream.LogDir, "agent-local", "fleet-agent",
			append([]string{"--kubeconfig", upstream.Upstream.Kubeconfig, "--namespace", fleet.DefaultSystemNamespace}, agentArgs()...)...)
		Expect(err).NotTo(HaveOccurred())
		e2e.WaitFor("the local agent to register onto fleet-local/local", func(g Gomega) {
			g.Expect(admin.Get(ctx, localKey, local)).To(Succeed())
			g.Expect(local.Status.Agent.LastSeen.IsZero()).To(BeFalse(), "agent log:\n%s", agent.Tail(4000))
			g.Expect(local.Status.Namespace).NotTo(BeEmpty())
		}, registerTimeout, 250*time.Millisecond)
	})

	It("deploys a GitRepo of fleet-local without targets onto the manager's own cluster", func() {
		root, err := os.MkdirTemp("", "fleet-e2e-local-git-")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(os.RemoveAll, root)
		repo, err := gittest.NewRepo(filepath.Join(root, "quickstart"), "main")
		Expect(err).NotTo(HaveOccurred())
		_, err = repo.Commit("quickstart", map[string]string{
			"simple/fleet.yaml": "defaultNamespace: quickstart\n",
			"simple/cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: hello}\ndata: {from: fleet-local}\n",
		})
		Expect(err).NotTo(HaveOccurred())
		git := gittest.NewServer(root)
		DeferCleanup(git.Close)

		Expect(admin.Create(ctx, &fleet.GitRepo{
			ObjectMeta: metav1.ObjectMeta{Name: "quickstart", Namespace: fleet.LocalWorkspace},
			Spec: fleet.GitRepoSpec{Repo: git.RepoURL("quickstart"), Branch: "main", Paths: []string{"simple"},
				PollingInterval: &metav1.Duration{Duration: 2 * time.Second}},
		})).To(Succeed())

		e2e.WaitFor("the bundle quickstart-simple Ready on the local cluster", func(g Gomega) {
			bd := &fleet.BundleDeployment{}
			g.Expect(admin.Get(ctx, types.NamespacedName{Namespace: local.Status.Namespace, Name: "quickstart-simple"}, bd)).To(Succeed())
			g.Expect(summary.State(bd)).To(Equal(fleet.Ready), "%s\nagent log:\n%s", summary.Message(bd), agent.Tail(4000))
		}, 2*time.Minute, 250*time.Millisecond)
		bundle := &fleet.Bundle{}
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: fleet.LocalWorkspace, Name: "quickstart-simple"}, bundle)).To(Succeed())
		Expect(bundle.Status.Summary.DesiredReady).To(Equal(1), "the default target selects the local Cluster only")

		cm := &corev1.ConfigMap{}
		Expect(admin.Get(ctx, types.NamespacedName{Namespace: "quickstart", Name: "hello"}, cm)).To(Succeed())
		Expect(cm.Data).To(HaveKeyWithValue("from", "fleet-local"))
	})

	It("gives the local agent an agent's rights upstream, no more", func() {
		cred, err := agentupstream.LoadStored(ctx, admin, fleet.DefaultSystemNamespace)
		Expect(err).NotTo(HaveOccurred())
		Expect(cred).NotTo(BeNil())
		Expect(cred.Namespace + "/" + cred.ClusterName).To(Equal("fleet-local/local"))
		c, err := client.New(cred.RESTConfig(), client.Options{Scheme: admin.Scheme()})
		Expect(err).NotTo(HaveOccurred())
		Expect(c.List(ctx, &fleet.BundleDeploymentList{}, client.InNamespace(cred.ClusterNamespace))).To(Succeed(), "its own BundleDeployments")
		for what, err := range map[string]error{
			"listing Clusters of fleet-local":  c.List(ctx, &fleet.ClusterList{}, client.InNamespace(fleet.LocalWorkspace)),
			"reading the local-cluster Secret": c.Get(ctx, types.NamespacedName{Namespace: fleet.LocalWorkspace, Name: fleet.LocalClusterSecretName}, &corev1.Secret{}),
			"listing GitRepos of fleet-local":  c.List(ctx, &fleet.GitRepoList{}, client.InNamespace(fleet.LocalWorkspace)),
		} {
			Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%s with the local agent's credential: %v", what, err)
		}
	})
}
