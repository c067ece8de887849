package restriction

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strings"

	apimeta "k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// Policies is the Policies of one namespace combined as Fleet combines them
// (its policyrestrictions.Aggregate): taken in name order, booleans OR-ed,
// allowed lists joined, and of each default the first one set. Each rule
// remembers the Policies it comes from, so that a refusal names them.
// The zero value (a namespace without Policies) allows anything.
type Policies struct {
	// Names are the combined Policies' names, sorted; empty when there are none.
	Names []string

	RequireServiceAccount  rule
	AllowedServiceAccounts list
	AllowNamespaceCreation bool

	GitDefaultServiceAccount    string
	GitDefaultClientSecretName  string
	GitAllowedClientSecretNames list
	GitAllowedRepoPatterns      patterns

	HelmDefaultServiceAccount  string
	HelmDefaultHelmSecretName  string
	HelmAllowedHelmSecretNames list
	HelmAllowedRepoPatterns    patterns
	HelmAllowedChartPatterns   patterns
}

// rule is a boolean rule and the Policies that set it.
type rule struct {
	On   bool
	From []string
}

func (r *rule) add(on bool, name string) {
	if on {
		r.On, r.From = true, append(r.From, name)
	}
}

// list is an allowed list, joined over the Policies that set one.
type list struct {
	Values []string
	From   []string
}

func (l *list) add(values []string, name string) {
	if len(values) > 0 {
		l.Values, l.From = append(l.Values, values...), append(l.From, name)
	}
}

// check allows value when the list is empty, value is empty (a default or
// requireServiceAccount decides about an empty value) or listed.
func (l *list) check(field, value string) error {
	if len(l.Values) == 0 || value == "" || slices.Contains(l.Values, value) {
		return nil
	}
	return fmt.Errorf("disallowed %s %s: %s allow%s %s only: use one of them",
		field, value, policyNames(l.From), plural(l.From), strings.Join(l.Values, ", "))
}

// patterns are regular expressions, joined over the Policies that set
// them, each matched against the whole value; a pattern also matches its
// own text verbatim, as in Fleet. err is set when one does not compile.
type patterns struct {
	Exprs []string
	From  []string
	res   []*regexp.Regexp
	err   error
}

func (p *patterns) add(exprs []string, name, field string) {
	if len(exprs) == 0 {
		return
	}
	p.Exprs, p.From = append(p.Exprs, exprs...), append(p.From, name)
	for i, e := range exprs {
		re, err := regexp.Compile(`^(?:` + e + `)$`)
		if err != nil {
			if p.err == nil {
				p.err = fmt.Errorf("policy %s: %s[%d] %q is not a regular expression (%v): fix the Policy", name, field, i, e, err)
			}
			continue
		}
		p.res = append(p.res, re)
	}
}

// check allows value when there are no patterns or value is empty, or one
// pattern matches it whole. A pattern that does not compile refuses
// everything the patterns are asked about, naming the Policy and field.
func (p *patterns) check(field, value string) error {
	if p.err != nil {
		return p.err
	}
	if len(p.Exprs) == 0 || value == "" || slices.Contains(p.Exprs, value) {
		return nil
	}
	for _, re := range p.res {
		if re.MatchString(value) {
			return nil
		}
	}
	return fmt.Errorf("disallowed %s %s: it must match one of the patterns %s of %s as a whole",
		field, value, strings.Join(p.Exprs, ", "), policyNames(p.From))
}

// Combine combines policies as Fleet does (see Policies); it does not
// change the slice.
func Combine(policies []fleet.Policy) *Policies {
	sorted := slices.Clone(policies)
	sort.Slice(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	m := &Policies{}
	for i := range sorted {
		p := &sorted[i]
		m.Names = append(m.Names, p.Name)
		m.RequireServiceAccount.add(p.RequireServiceAccount, p.Name)
		// OR-ed like the others, so the least restrictive Policy wins here,
		// as in Fleet: one Policy allowing namespace creation allows it for
		// the whole namespace.
		m.AllowNamespaceCreation = m.AllowNamespaceCreation || p.AllowNamespaceCreation
		m.AllowedServiceAccounts.add(p.AllowedServiceAccounts, p.Name)
		if g := p.GitRepo; g != nil {
			m.GitDefaultServiceAccount = firstSet(m.GitDefaultServiceAccount, g.DefaultServiceAccount)
			m.GitDefaultClientSecretName = firstSet(m.GitDefaultClientSecretName, g.DefaultClientSecretName)
			m.GitAllowedClientSecretNames.add(g.AllowedClientSecretNames, p.Name)
			m.GitAllowedRepoPatterns.add(g.AllowedRepoPatterns, p.Name, "gitRepo.allowedRepoPatterns")
		}
		if h := p.HelmOp; h != nil {
			m.HelmDefaultServiceAccount = firstSet(m.HelmDefaultServiceAccount, h.DefaultServiceAccount)
			m.HelmDefaultHelmSecretName = firstSet(m.HelmDefaultHelmSecretName, h.DefaultHelmSecretName)
			m.HelmAllowedHelmSecretNames.add(h.AllowedHelmSecretNames, p.Name)
			m.HelmAllowedRepoPatterns.add(h.AllowedHelmRepoPatterns, p.Name, "helmOp.allowedHelmRepoPatterns")
			m.HelmAllowedChartPatterns.add(h.AllowedChartPatterns, p.Name, "helmOp.allowedChartPatterns")
		}
	}
	return m
}

// LoadPolicies reads and combines the Policies of namespace ns. A cluster
// without the Policy kind has none.
func LoadPolicies(ctx context.Context, c client.Reader, ns string) (*Policies, error) {
	l := &fleet.PolicyList{}
	if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
		if apimeta.IsNoMatchError(err) {
			return &Policies{}, nil
		}
		return nil, fmt.Errorf("listing the Policies of namespace %s: %w", ns, err)
	}
	return Combine(l.Items), nil
}

// CreateNamespace is what the Policies say of creating a missing release
// namespace downstream: false when they require a service account and
// none allows namespace creation (a tenant's account should not need the
// cluster-wide right to create namespaces), nil (no say) otherwise.
func (m *Policies) CreateNamespace() *bool {
	if m.RequireServiceAccount.On && !m.AllowNamespaceCreation {
		no := false
		return &no
	}
	return nil
}

// GitRepo fills the Policies' gitRepo defaults into spec (where the
// GitRepoRestrictions left the fields empty) and checks spec against them,
// in Fleet's order: defaults, then the allowed lists, then
// requireServiceAccount.
func (m *Policies) GitRepo(spec *fleet.GitRepoSpec) error {
	spec.ServiceAccount = firstSet(spec.ServiceAccount, m.GitDefaultServiceAccount)
	spec.ClientSecretName = firstSet(spec.ClientSecretName, m.GitDefaultClientSecretName)
	return refused(
		m.AllowedServiceAccounts.check("serviceAccount", spec.ServiceAccount),
		m.GitAllowedRepoPatterns.check("repo", spec.Repo),
		m.GitAllowedClientSecretNames.check("clientSecretName", spec.ClientSecretName),
		m.requireServiceAccount(spec.ServiceAccount, "spec.serviceAccount", "gitRepo.defaultServiceAccount"),
	)
}

// HelmOp fills the Policies' helmOp defaults into spec and checks spec,
// and each target's serviceAccount and chart, against them.
func (m *Policies) HelmOp(spec *fleet.HelmOpSpec) error {
	spec.ServiceAccount = firstSet(spec.ServiceAccount, m.HelmDefaultServiceAccount)
	spec.HelmSecretName = firstSet(spec.HelmSecretName, m.HelmDefaultHelmSecretName)
	errs := []error{
		m.AllowedServiceAccounts.check("serviceAccount", spec.ServiceAccount),
		m.HelmAllowedHelmSecretNames.check("helmSecretName", spec.HelmSecretName),
	}
	if h := spec.Helm; h != nil {
		errs = append(errs,
			m.HelmAllowedRepoPatterns.check("helm.repo", h.Repo),
			m.HelmAllowedChartPatterns.check("helm.chart", h.Chart))
	}
	for i := range spec.Targets {
		t := &spec.Targets[i]
		field := fmt.Sprintf("targets[%d]", i)
		errs = append(errs, m.AllowedServiceAccounts.check(field+".serviceAccount", t.ServiceAccount))
		if h := t.Helm; h != nil {
			errs = append(errs,
				m.HelmAllowedRepoPatterns.check(field+".helm.repo", h.Repo),
				m.HelmAllowedChartPatterns.check(field+".helm.chart", h.Chart))
		}
	}
	errs = append(errs, m.requireServiceAccount(spec.ServiceAccount, "spec.serviceAccount", "helmOp.defaultServiceAccount"))
	return refused(errs...)
}

// Bundle checks a Bundle against the Policies without changing it: there
// is no default at this point, as in Fleet. It closes the way around the
// GitRepo and HelmOp checks (a Bundle written directly, a target of
// fleet.yaml setting its own serviceAccount).
func (m *Policies) Bundle(spec *fleet.BundleSpec) error {
	errs := make([]error, 0, len(spec.Targets)+2)
	errs = append(errs, m.AllowedServiceAccounts.check("serviceAccount", spec.ServiceAccount))
	for i := range spec.Targets {
		t := &spec.Targets[i]
		errs = append(errs, m.AllowedServiceAccounts.check(fmt.Sprintf("serviceAccount (target %s)", targetName(t, i)), t.ServiceAccount))
	}
	errs = append(errs, m.requireServiceAccount(spec.ServiceAccount, "the Bundle's serviceAccount", ""))
	return refused(errs...)
}

// requireServiceAccount refuses an empty service account when a Policy
// requires one. The message begins with Fleet's text.
func (m *Policies) requireServiceAccount(sa, field, defaultField string) error {
	if !m.RequireServiceAccount.On || sa != "" {
		return nil
	}
	how := "set " + field
	if defaultField != "" {
		how += ", or " + defaultField + " in a Policy"
	}
	return fmt.Errorf("serviceAccount is required by Policy but is not set: requireServiceAccount of %s: %s",
		policyNames(m.RequireServiceAccount.From), how)
}

// refused makes the first rule broken a Stalling error with
// fleet.ReasonPolicyRefused.
func refused(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return outcome.Stall(fleet.ReasonPolicyRefused, err)
		}
	}
	return nil
}

func targetName(t *fleet.BundleTarget, i int) string {
	if t.Name != "" {
		return t.Name
	}
	return fmt.Sprintf("#%d", i)
}

func policyNames(names []string) string {
	if len(names) == 1 {
		return "Policy " + names[0]
	}
	return "Policies " + strings.Join(names, ", ")
}

func plural(names []string) string {
	if len(names) == 1 {
		return "s"
	}
	return ""
}

func firstSet(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
