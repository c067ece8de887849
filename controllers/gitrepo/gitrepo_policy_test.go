package gitrepo_test

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// TestPolicyRefusesThenDefaults: the GitRepo enforcement point of a Policy.
// A GitRepo without a serviceAccount is refused (Accepted=False,
// PolicyRefused, naming the Policy) and nothing is read; a second Policy's
// gitRepo.defaultServiceAccount then lets it through at once, and its
// Bundle carries the default. A Policy pattern that does not compile refuses
// it, naming the Policy and the field.
func TestPolicyRefusesThenDefaults(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	repo, _ := newGitRepo(g, ns+"-policy", appFiles("one", "1"))
	require := &fleet.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "require"}, RequireServiceAccount: true}
	g.Expect(env.CreateAndWait(ctx, require)).To(Succeed())
	createGitRepo(g, ns, "tenant", fleet.GitRepoSpec{Repo: repo.Dir, PollingInterval: every(time.Second)})

	g.Eventually(getGitRepo(g, ns, "tenant"), eventually, poll).Should(And(
		condition(fleet.ConditionAccepted, metav1.ConditionFalse,
			"serviceAccount is required by Policy but is not set: requireServiceAccount of Policy require"),
		WithTransform(func(gr *fleet.GitRepo) string {
			for _, c := range gr.Status.Conditions {
				if c.Type == fleet.ConditionAccepted {
					return c.Reason
				}
			}
			return ""
		}, Equal(fleet.ReasonPolicyRefused)),
	))
	g.Consistently(func(g Gomega) { g.Expect(bundles(g, ns, "tenant")).To(BeEmpty()) }, 2*time.Second, poll).Should(Succeed())

	defaults := &fleet.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "defaults"},
		GitRepo: &fleet.GitRepoPolicySpec{DefaultServiceAccount: "deployer"}}
	g.Expect(env.CreateAndWait(ctx, defaults)).To(Succeed())
	g.Eventually(func(g Gomega) {
		b := bundles(g, ns, "tenant")["tenant-apps-one"]
		g.Expect(b.Spec.ServiceAccount).To(Equal("deployer"))
	}, eventually, poll).Should(Succeed(), "the Policy's default on the Bundle")
	g.Eventually(getGitRepo(g, ns, "tenant"), eventually, poll).Should(condition(fleet.ConditionAccepted, metav1.ConditionTrue, ""))

	broken := &fleet.Policy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "broken"},
		GitRepo: &fleet.GitRepoPolicySpec{AllowedRepoPatterns: []string{"(unclosed"}}}
	g.Expect(env.CreateAndWait(ctx, broken)).To(Succeed())
	g.Eventually(getGitRepo(g, ns, "tenant"), eventually, poll).Should(condition(fleet.ConditionAccepted, metav1.ConditionFalse,
		`policy broken: gitRepo.allowedRepoPatterns[0] "(unclosed" is not a regular expression`))
	g.Expect(bundles(g, ns, "tenant")).To(HaveKey("tenant-apps-one"), "what was deployed stays")
}

// TestNamespaceSelectorTravelsToTheBundle: a GitRepoRestriction's
// allowedTargetNamespaceSelector requires a targetNamespace (Fleet's text)
// and is carried in the Bundle's options for the agent to check; a changed
// selector is written to the Bundles without a new commit.
func TestNamespaceSelectorTravelsToTheBundle(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	repo, _ := newGitRepo(g, ns+"-selector", appFiles("one", "1"))
	res := &fleet.GitRepoRestriction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "labelled"},
		AllowedTargetNamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}}
	g.Expect(env.CreateAndWait(ctx, res)).To(Succeed())
	createGitRepo(g, ns, "tenant", fleet.GitRepoSpec{Repo: repo.Dir, PollingInterval: every(time.Second)})
	g.Eventually(getGitRepo(g, ns, "tenant"), eventually, poll).Should(condition(fleet.ConditionAccepted, metav1.ConditionFalse,
		"empty targetNamespace denied, because allowedTargetNamespaceSelector restriction is present: GitRepoRestriction labelled"))

	updateSpec(g, ns, "tenant", func(s *fleet.GitRepoSpec) { s.TargetNamespace = "team-a" })
	g.Eventually(func(g Gomega) {
		b := bundles(g, ns, "tenant")["tenant-apps-one"]
		g.Expect(b.Spec.AllowedTargetNamespaceSelector).To(Equal(res.AllowedTargetNamespaceSelector))
		g.Expect(b.Spec.TargetNamespace).To(Equal("team-a"))
	}, eventually, poll).Should(Succeed())

	g.Expect(env.Get(ctx, client.ObjectKeyFromObject(res), res)).To(Succeed())
	res.AllowedTargetNamespaceSelector.MatchLabels["env"] = "prod"
	g.Expect(env.Update(ctx, res)).To(Succeed())
	g.Eventually(func(g Gomega) {
		b := bundles(g, ns, "tenant")["tenant-apps-one"]
		g.Expect(b.Spec.AllowedTargetNamespaceSelector.MatchLabels).To(Equal(map[string]string{"team": "a", "env": "prod"}))
	}, eventually, poll).Should(Succeed(), "a changed selector reaches the Bundle without a new commit")
}
