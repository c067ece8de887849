package security_test

import (
	"fmt"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/conditions"
	"github.com/gitfleet/fleet/test/framework"
)

const (
	// policyNS is the tenant's namespace on the manager, policyLabel the
	// label of its cluster (the second downstream, with a real agent).
	policyNS, policyAgentNS, policyLabel = "sec-policy", "sec-policy-agent", "sec-policy"
	// policyAppNS is where the Policy's GitRepo deploys, as account deployer;
	// selectedNS where the restricted GitRepo deploys.
	policyAppNS, selectedNS = "sec-policy-app", "sec-policy-selected"
)

// policyEnv is what the Policy specs share.
type policyEnv struct {
	down      client.Client
	tenant    client.Client
	clusterNS string
}

// A Policy and a GitRepoRestriction's allowedTargetNamespaceSelector, with a
// real agent: a Policy refuses a tenant's GitRepo without a service account
// and then defaults one, and a namespace without the selector's labels
// blocks a restricted GitRepo with Fleet's reason until it is labelled.
var _ = Describe("Policy and allowedTargetNamespaceSelector with a real agent", Ordered, ContinueOnFailure, policySpecs)

func policySpecs() {
	s := &policyEnv{}

	BeforeAll(func() {
		ctx, ds := env.Ctx, env.Downstreams[1]
		By("registering the second downstream cluster in the tenant's namespace and running its agent")
		v := registerByToken(ctx, ds, policyNS, policyAgentNS, map[string]string{"env": policyLabel})
		var err error
		s.down, err = ds.Client(nil)
		Expect(err).NotTo(HaveOccurred())
		agent, err := framework.Start(env.LogDir, "agent-policy", "fleet-agent", "--kubeconfig", ds.Kubeconfig, "--namespace", policyAgentNS,
			"--checkin-interval", "5s", "--min-backoff", "100ms", "--max-backoff", "2s", "--resync", "30s")
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(agent.Stop)
		Eventually(func(g Gomega) {
			c := &fleet.Cluster{}
			g.Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(v.cluster), c)).To(Succeed())
			g.Expect(c.Status.Namespace).NotTo(BeEmpty())
			s.clusterNS = c.Status.Namespace
		}).WithTimeout(time.Minute).Should(Succeed())
		s.tenant, err = framework.TenantClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), policyNS)
		Expect(err).NotTo(HaveOccurred())

		By("giving the downstream cluster the tenant's account: ConfigMaps and Helm's Secrets in " + policyAppNS)
		om := metav1.ObjectMeta{Namespace: policyAppNS, Name: "deployer"}
		for _, obj := range []client.Object{
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: policyAppNS}},
			&corev1.ServiceAccount{ObjectMeta: om},
			&rbacv1.Role{ObjectMeta: om, Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps", "secrets"},
				Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}}}},
			&rbacv1.RoleBinding{ObjectMeta: om, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "deployer"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: policyAppNS, Name: "deployer"}}},
		} {
			Expect(s.down.Create(ctx, obj)).To(Succeed())
		}
	})

	It("a Policy refuses a GitRepo without a service account, then its default deploys it as that account", s.policyRefusesThenDefaults)
	It("a namespace without the selector's labels blocks a restricted GitRepo with Fleet's reason; labelled, it deploys", s.selectorBlocksUntilLabelled)
}

// gitRepo is a tenant's GitRepo of one ConfigMap named name, deployed to
// namespace ns of the Policy cluster.
func (s *policyEnv) gitRepo(name, ns string) *fleet.GitRepo {
	_, url := gitRepoAt("policy-"+name, map[string]string{"cm.yaml": fmt.Sprintf(configMap, name)})
	return &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: policyNS, Name: name},
		Spec: fleet.GitRepoSpec{Repo: url, Branch: "main", TargetNamespace: ns, PollingInterval: pollEvery(time.Second),
			Targets: []fleet.GitTarget{{ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": policyLabel}}}}}}
}

// deployment returns the BundleDeployment of a GitRepo on the Policy
// cluster.
func (s *policyEnv) deployment(g Gomega, repo string) *fleet.BundleDeployment {
	list := &fleet.BundleDeploymentList{}
	g.Expect(env.Admin.List(env.Ctx, list, client.InNamespace(s.clusterNS), client.MatchingLabels{fleet.RepoLabel: repo})).To(Succeed())
	g.Expect(list.Items).To(HaveLen(1), "one BundleDeployment of %s", repo)
	return &list.Items[0]
}

func (s *policyEnv) policyRefusesThenDefaults() {
	ctx := env.Ctx
	policy := &fleet.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: policyNS, Name: "tenants"}, RequireServiceAccount: true}
	Expect(s.tenant.Create(ctx, policy.DeepCopy())).To(MatchError(ContainSubstring("forbidden")), "a tenant must not write its own Policy")
	Expect(env.Admin.Create(ctx, policy)).To(Succeed())

	By("the tenant's GitRepo sets no serviceAccount: refused, naming the Policy, nothing read")
	repo := s.gitRepo("no-account", policyAppNS)
	Expect(s.tenant.Create(ctx, repo)).To(Succeed())
	c := gitRepoCondition(s.tenant, policyNS, repo.Name, fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonPolicyRefused, time.Minute)
	Expect(c.Message).To(HavePrefix("serviceAccount is required by Policy but is not set: requireServiceAccount of Policy tenants"))
	Consistently(func() []fleet.Bundle { return bundlesOf(policyNS, repo.Name) }).WithTimeout(3 * time.Second).Should(BeEmpty())

	By("the admin gives the Policy a default account: the GitRepo deploys as deployer, namespace creation off")
	Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(policy), policy)).To(Succeed())
	policy.GitRepo = &fleet.GitRepoPolicySpec{DefaultServiceAccount: "deployer"}
	Expect(env.Admin.Update(ctx, policy)).To(Succeed())
	gitRepoCondition(s.tenant, policyNS, repo.Name, fleet.ConditionAccepted, metav1.ConditionTrue, fleet.ReasonBundlesRead, time.Minute)
	Eventually(func(g Gomega) {
		bd := s.deployment(g, repo.Name)
		g.Expect(bd.Spec.Options.ServiceAccount).To(Equal("deployer"))
		g.Expect(bd.Spec.Options.CreateNamespace).To(Equal(new(bool)))
		g.Expect(conditions.IsTrue(bd, fleet.ConditionReady)).To(BeTrue(), "Ready: %+v", conditions.Get(bd, fleet.ConditionReady))
	}).WithTimeout(2 * time.Minute).WithPolling(200 * time.Millisecond).Should(Succeed())
	Expect(s.down.Get(ctx, client.ObjectKey{Namespace: policyAppNS, Name: "no-account"}, &corev1.ConfigMap{})).To(Succeed())

	By("the next spec restricts the namespace instead: the GitRepo and the Policy go")
	Expect(env.Admin.Delete(ctx, repo)).To(Succeed())
	Expect(env.Admin.Delete(ctx, policy)).To(Succeed())
}

func (s *policyEnv) selectorBlocksUntilLabelled() {
	ctx := env.Ctx
	res := &fleet.GitRepoRestriction{ObjectMeta: metav1.ObjectMeta{Namespace: policyNS, Name: "labelled-only"},
		AllowedTargetNamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}
	Expect(env.Admin.Create(ctx, res)).To(Succeed())
	repo := s.gitRepo("selected", selectedNS)
	Expect(s.tenant.Create(ctx, repo)).To(Succeed())
	blocked := func(prefix string) {
		Eventually(func(g Gomega) {
			bd := s.deployment(g, repo.Name)
			g.Expect(bd.Spec.Options.AllowedTargetNamespaceSelector).To(Equal(res.AllowedTargetNamespaceSelector))
			c := conditions.Get(bd, fleet.ConditionDeployed)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
			g.Expect(c.Reason).To(Equal(fleet.ReasonNamespaceNotAllowed))
			g.Expect(c.Message).To(HavePrefix(prefix))
		}).WithTimeout(2*time.Minute).WithPolling(200*time.Millisecond).Should(Succeed(), "blocked: %s", prefix)
		Consistently(func() bool {
			return apierrors.IsNotFound(s.down.Get(ctx, client.ObjectKey{Namespace: selectedNS, Name: "selected"}, &corev1.ConfigMap{}))
		}).WithTimeout(3*time.Second).Should(BeTrue(), "nothing deployed")
	}

	By("the namespace does not exist downstream: blocked, and the agent does not create it")
	blocked("target namespace " + selectedNS + " does not exist on downstream cluster")
	Expect(apierrors.IsNotFound(s.down.Get(ctx, client.ObjectKey{Name: selectedNS}, &corev1.Namespace{}))).To(BeTrue())

	By("the namespace exists without the labels: blocked with Fleet's reason")
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: selectedNS}}
	Expect(s.down.Create(ctx, ns)).To(Succeed())
	blocked("target namespace " + selectedNS + " does not match AllowedTargetNamespaceSelector team=a")

	By("labelled, it deploys by itself")
	ns.Labels = map[string]string{"team": "a"}
	Expect(s.down.Update(ctx, ns)).To(Succeed())
	Eventually(func() error {
		return s.down.Get(ctx, client.ObjectKey{Namespace: selectedNS, Name: "selected"}, &corev1.ConfigMap{})
	}).WithTimeout(2*time.Minute).WithPolling(time.Second).Should(Succeed(), "deployed once the namespace carries the labels")
}
