package restriction

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

func policy(name string, mutate func(p *fleet.Policy)) fleet.Policy {
	p := fleet.Policy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if mutate != nil {
		mutate(&p)
	}
	return p
}

// TestCombine: several Policies of a namespace combine as Fleet's
// policyrestrictions.Aggregate does: name order, booleans OR-ed, lists
// joined, the first default set.
func TestCombine(t *testing.T) {
	g := NewWithT(t)
	m := Combine([]fleet.Policy{
		policy("b", func(p *fleet.Policy) {
			p.AllowedServiceAccounts = []string{"sa-b"}
			p.GitRepo = &fleet.GitRepoPolicySpec{DefaultServiceAccount: "from-b", AllowedRepoPatterns: []string{"https://b/.*"}}
			p.AllowNamespaceCreation = true
		}),
		policy("a", func(p *fleet.Policy) {
			p.RequireServiceAccount = true
			p.AllowedServiceAccounts = []string{"sa-a"}
			p.GitRepo = &fleet.GitRepoPolicySpec{AllowedRepoPatterns: []string{"https://a/.*"}, DefaultClientSecretName: "creds-a"}
			p.HelmOp = &fleet.HelmOpPolicySpec{DefaultServiceAccount: "helm-a"}
		}),
		policy("c", func(p *fleet.Policy) {
			p.GitRepo = &fleet.GitRepoPolicySpec{DefaultServiceAccount: "from-c", DefaultClientSecretName: "creds-c"}
		}),
	})
	g.Expect(m.Names).To(Equal([]string{"a", "b", "c"}))
	g.Expect(m.RequireServiceAccount).To(Equal(rule{On: true, From: []string{"a"}}))
	g.Expect(m.AllowNamespaceCreation).To(BeTrue(), "OR-ed: one Policy allowing it allows it")
	g.Expect(m.AllowedServiceAccounts.Values).To(Equal([]string{"sa-a", "sa-b"}))
	g.Expect(m.GitAllowedRepoPatterns.Exprs).To(Equal([]string{"https://a/.*", "https://b/.*"}))
	g.Expect(m.GitDefaultServiceAccount).To(Equal("from-b"), "first set in name order (a sets none)")
	g.Expect(m.GitDefaultClientSecretName).To(Equal("creds-a"))
	g.Expect(m.HelmDefaultServiceAccount).To(Equal("helm-a"))
	g.Expect(m.CreateNamespace()).To(BeNil(), "allowNamespaceCreation lifts the default")

	g.Expect(Combine(nil).CreateNamespace()).To(BeNil(), "no Policy, no say")
	g.Expect(Combine([]fleet.Policy{policy("x", func(p *fleet.Policy) { p.RequireServiceAccount = true })}).CreateNamespace()).
		To(Equal(ptr.To(false)), "requireServiceAccount turns namespace creation off")
}

// TestPolicyGitRepo: defaults first, then the allowed lists, then
// requireServiceAccount; every refusal is PolicyRefused and names the rule
// and the Policies it comes from.
func TestPolicyGitRepo(t *testing.T) {
	require := policy("require", func(p *fleet.Policy) { p.RequireServiceAccount = true })
	for name, tc := range map[string]struct {
		policies []fleet.Policy
		spec     fleet.GitRepoSpec
		wantSA   string
		wantErr  string
	}{
		"no Policy allows anything": {spec: fleet.GitRepoSpec{Repo: "https://any/x"}},
		"required and missing": {policies: []fleet.Policy{require}, spec: fleet.GitRepoSpec{Repo: "https://r/x"},
			wantErr: "serviceAccount is required by Policy but is not set: requireServiceAccount of Policy require: set spec.serviceAccount, or gitRepo.defaultServiceAccount in a Policy"},
		"required and defaulted by another Policy": {
			policies: []fleet.Policy{require, policy("defaults", func(p *fleet.Policy) {
				p.GitRepo = &fleet.GitRepoPolicySpec{DefaultServiceAccount: "tenant"}
			})},
			spec: fleet.GitRepoSpec{Repo: "https://r/x"}, wantSA: "tenant"},
		"an own serviceAccount wins over the default": {
			policies: []fleet.Policy{policy("d", func(p *fleet.Policy) { p.GitRepo = &fleet.GitRepoPolicySpec{DefaultServiceAccount: "tenant"} })},
			spec:     fleet.GitRepoSpec{Repo: "https://r/x", ServiceAccount: "own"}, wantSA: "own"},
		"allowed lists are joined": {
			policies: []fleet.Policy{
				policy("p1", func(p *fleet.Policy) { p.AllowedServiceAccounts = []string{"one"} }),
				policy("p2", func(p *fleet.Policy) { p.AllowedServiceAccounts = []string{"two"} }),
			},
			spec: fleet.GitRepoSpec{Repo: "https://r/x", ServiceAccount: "two"}, wantSA: "two"},
		"a serviceAccount no Policy allows": {
			policies: []fleet.Policy{
				policy("p1", func(p *fleet.Policy) { p.AllowedServiceAccounts = []string{"one"} }),
				policy("p2", func(p *fleet.Policy) { p.AllowedServiceAccounts = []string{"two"} }),
			},
			spec:    fleet.GitRepoSpec{Repo: "https://r/x", ServiceAccount: "admin"},
			wantErr: "disallowed serviceAccount admin: Policies p1, p2 allow one, two only: use one of them"},
		"the default is checked against the list too": {
			policies: []fleet.Policy{policy("p", func(p *fleet.Policy) {
				p.AllowedServiceAccounts = []string{"one"}
				p.GitRepo = &fleet.GitRepoPolicySpec{DefaultServiceAccount: "admin"}
			})},
			spec:    fleet.GitRepoSpec{Repo: "https://r/x"},
			wantErr: "disallowed serviceAccount admin: Policy p allows one only: use one of them"},
		"repo patterns match the whole URL": {
			policies: []fleet.Policy{policy("repos", func(p *fleet.Policy) {
				p.GitRepo = &fleet.GitRepoPolicySpec{AllowedRepoPatterns: []string{"https://git.example/team/.*"}}
			})},
			spec:    fleet.GitRepoSpec{Repo: "https://evil.example/https://git.example/team/x"},
			wantErr: "disallowed repo https://evil.example/https://git.example/team/x: it must match one of the patterns https://git.example/team/.* of Policy repos as a whole"},
		"a repo pattern matches": {
			policies: []fleet.Policy{policy("repos", func(p *fleet.Policy) {
				p.GitRepo = &fleet.GitRepoPolicySpec{AllowedRepoPatterns: []string{"https://git.example/team/.*"}}
			})},
			spec: fleet.GitRepoSpec{Repo: "https://git.example/team/app"}},
		"a pattern that does not compile names the Policy and field": {
			policies: []fleet.Policy{policy("broken", func(p *fleet.Policy) {
				p.GitRepo = &fleet.GitRepoPolicySpec{AllowedRepoPatterns: []string{"https://ok/.*", "(unclosed"}}
			})},
			spec:    fleet.GitRepoSpec{Repo: "https://ok/x"},
			wantErr: "policy broken: gitRepo.allowedRepoPatterns[1] \"(unclosed\" is not a regular expression (error parsing regexp: missing closing ): `^(?:(unclosed)$`): fix the Policy"},
		"a client secret not allowed, after the default": {
			policies: []fleet.Policy{policy("s", func(p *fleet.Policy) {
				p.GitRepo = &fleet.GitRepoPolicySpec{DefaultClientSecretName: "other", AllowedClientSecretNames: []string{"creds"}}
			})},
			spec:    fleet.GitRepoSpec{Repo: "https://r/x"},
			wantErr: "disallowed clientSecretName other: Policy s allows creds only: use one of them"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			spec := tc.spec
			err := Combine(tc.policies).GitRepo(&spec)
			if tc.wantErr != "" {
				g.Expect(err).To(MatchError(tc.wantErr))
				g.Expect(outcome.IsStalling(err)).To(BeTrue())
				g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonPolicyRefused))
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(spec.ServiceAccount).To(Equal(tc.wantSA))
		})
	}
}

// TestPolicyHelmOp: the helmOp defaults and patterns, for the HelmOp and
// each of its targets.
func TestPolicyHelmOp(t *testing.T) {
	charts := policy("charts", func(p *fleet.Policy) {
		p.RequireServiceAccount = true
		p.AllowedServiceAccounts = []string{"deployer"}
		p.HelmOp = &fleet.HelmOpPolicySpec{
			DefaultServiceAccount:   "deployer",
			DefaultHelmSecretName:   "repo-creds",
			AllowedHelmSecretNames:  []string{"repo-creds"},
			AllowedHelmRepoPatterns: []string{"https://charts\\.example/.*"},
			AllowedChartPatterns:    []string{"app|web"},
		}
	})
	op := func(repo, chart string, targets ...fleet.BundleTarget) fleet.HelmOpSpec {
		return fleet.HelmOpSpec{BundleSpec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Repo: repo, Chart: chart}},
			Targets:                 targets,
		}}
	}
	g := NewWithT(t)
	spec := op("https://charts.example/stable", "app")
	g.Expect(Combine([]fleet.Policy{charts}).HelmOp(&spec)).To(Succeed())
	g.Expect(spec.ServiceAccount).To(Equal("deployer"))
	g.Expect(spec.HelmSecretName).To(Equal("repo-creds"))

	for _, tc := range []struct {
		spec fleet.HelmOpSpec
		want string
	}{
		{op("https://elsewhere/x", "app"), "disallowed helm.repo https://elsewhere/x: it must match one of the patterns https://charts\\.example/.* of Policy charts as a whole"},
		{op("https://charts.example/stable", "db"), "disallowed helm.chart db: it must match one of the patterns app|web of Policy charts as a whole"},
		{op("https://charts.example/stable", "app", fleet.BundleTarget{BundleDeploymentOptions: fleet.BundleDeploymentOptions{ServiceAccount: "admin"}}),
			"disallowed targets[0].serviceAccount admin: Policy charts allows deployer only: use one of them"},
		{op("https://charts.example/stable", "app", fleet.BundleTarget{BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Chart: "db"}}}),
			"disallowed targets[0].helm.chart db: it must match one of the patterns app|web of Policy charts as a whole"},
	} {
		spec := tc.spec
		g.Expect(Combine([]fleet.Policy{charts}).HelmOp(&spec)).To(MatchError(tc.want))
	}
}

// TestPolicyBundle: the Bundle is checked, never changed: no default at this
// point, and a target's own serviceAccount is held to the list.
func TestPolicyBundle(t *testing.T) {
	g := NewWithT(t)
	m := Combine([]fleet.Policy{policy("p", func(p *fleet.Policy) {
		p.RequireServiceAccount = true
		p.AllowedServiceAccounts = []string{"good"}
		p.GitRepo = &fleet.GitRepoPolicySpec{DefaultServiceAccount: "good"}
	})})
	empty := fleet.BundleSpec{}
	g.Expect(m.Bundle(&empty)).To(MatchError("serviceAccount is required by Policy but is not set: requireServiceAccount of Policy p: set the Bundle's serviceAccount"))
	g.Expect(empty.ServiceAccount).To(BeEmpty(), "no default at the Bundle")

	ok := fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{ServiceAccount: "good"},
		Targets: []fleet.BundleTarget{{Name: "dev"}}}
	g.Expect(m.Bundle(&ok)).To(Succeed(), "a target without its own serviceAccount inherits the checked one")

	escape := fleet.BundleSpec{BundleDeploymentOptions: fleet.BundleDeploymentOptions{ServiceAccount: "good"},
		Targets: []fleet.BundleTarget{{Name: "prod", BundleDeploymentOptions: fleet.BundleDeploymentOptions{ServiceAccount: "evil"}}}}
	g.Expect(m.Bundle(&escape)).To(MatchError("disallowed serviceAccount (target prod) evil: Policy p allows good only: use one of them"))
}

// TestAndSelectors: several restrictions' selectors all apply.
func TestAndSelectors(t *testing.T) {
	g := NewWithT(t)
	a := &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
	b := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod", "team": "b"},
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "tier", Operator: metav1.LabelSelectorOpExists}}}
	g.Expect(AndSelectors(nil, nil)).To(BeNil())
	g.Expect(AndSelectors(nil, a)).To(Equal(a))
	got := AndSelectors(a, b)
	g.Expect(got.MatchLabels).To(Equal(map[string]string{"team": "a", "env": "prod"}))
	g.Expect(got.MatchExpressions).To(ConsistOf(
		metav1.LabelSelectorRequirement{Key: "team", Operator: metav1.LabelSelectorOpIn, Values: []string{"b"}},
		metav1.LabelSelectorRequirement{Key: "tier", Operator: metav1.LabelSelectorOpExists},
	))
	g.Expect(a.MatchLabels).To(HaveLen(1), "the inputs are left as they were")
}
