package gitrepo

import (
	"context"
	"encoding/json"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/gitfetch"
	"github.com/gitfleet/fleet/internal/restriction"
)

// restricted is a GitRepo as the restrictions and Policies of its namespace
// make it: its spec with their defaults filled in, and what its Bundles must
// carry for the agent.
type restricted struct {
	repo *fleet.GitRepo
	// nsSelector is the allowedTargetNamespaceSelectors of the
	// GitRepoRestrictions, all of which apply; nil when none sets one.
	nsSelector *metav1.LabelSelector
}

// restrict applies the GitRepoRestrictions of the GitRepo's namespace, as
// Fleet does, then its Policies: it returns the GitRepo with the defaults
// filled in, or a Stalling error naming the rule the GitRepo breaks
// (fleet.ReasonRestricted for a restriction, fleet.ReasonPolicyRefused for
// a Policy). Every restriction of the namespace applies, and the combined
// Policies (see restriction.Combine); a restriction's default comes before
// a Policy's.
func (r *Reconciler) restrict(ctx context.Context, repo *fleet.GitRepo) (*restricted, error) {
	var sel *metav1.LabelSelector
	eff, err := restriction.Apply(ctx, r.Client, repo, func(res *fleet.GitRepoRestriction, eff *fleet.GitRepo) error {
		sel = restriction.AndSelectors(sel, res.AllowedTargetNamespaceSelector)
		return applyRestriction(res, &eff.Spec)
	})
	if err != nil {
		return nil, err
	}
	policies, err := restriction.LoadPolicies(ctx, r.Client, repo.Namespace)
	if err != nil {
		return nil, err
	}
	if err := policies.GitRepo(&eff.Spec); err != nil {
		return nil, err
	}
	return &restricted{repo: eff, nsSelector: sel}, nil
}

// applyRestriction fills the defaults of one restriction into spec and checks
// spec against its allowed lists; an empty list allows anything. Repo
// patterns must match the whole URL (Fleet matches them anywhere in it, so
// "github.com/org/" there also allows https://evil.test/github.com/org/).
func applyRestriction(res *fleet.GitRepoRestriction, spec *fleet.GitRepoSpec) error {
	if spec.ServiceAccount == "" {
		spec.ServiceAccount = res.DefaultServiceAccount
	}
	if spec.ClientSecretName == "" {
		spec.ClientSecretName = res.DefaultClientSecretName
	}
	if err := restriction.Allowed(res, "serviceAccount", spec.ServiceAccount, res.AllowedServiceAccounts); err != nil {
		return err
	}
	// Without clientSecretName the GitRepo uses the gitcredential Secret when
	// there is one: allowed where that name is.
	secretName := spec.ClientSecretName
	if secretName == "" && slices.Contains(res.AllowedClientSecretNames, gitfetch.DefaultClientSecretName) {
		secretName = gitfetch.DefaultClientSecretName
	}
	if err := restriction.Allowed(res, "clientSecretName", secretName, res.AllowedClientSecretNames); err != nil {
		return err
	}
	// The Helm credentials too are a Secret the manager reads and sends
	// away: held to the same list, as a HelmOp's are.
	if spec.HelmSecretName != "" {
		if err := restriction.Allowed(res, "helmSecretName", spec.HelmSecretName, res.AllowedClientSecretNames); err != nil {
			return err
		}
	}
	if err := restriction.TargetNamespace(res, "spec.targetNamespace", spec.TargetNamespace, true); err != nil {
		return err
	}
	if err := restriction.TargetNamespaceSelected(res, "spec.targetNamespace", spec.TargetNamespace); err != nil {
		return err
	}
	return restriction.AllowedRepo(res, "repo", spec.Repo)
}

// fingerprint identifies what the restrictions made of the GitRepo: its
// effective spec and what its Bundles carry for them.
func (r *restricted) fingerprint() string {
	b, err := json.Marshal(struct {
		Spec       fleet.GitRepoSpec     `json:"spec"`
		NSSelector *metav1.LabelSelector `json:"nsSelector,omitempty"`
	}{r.repo.Spec, r.nsSelector})
	if err != nil {
		// Not reached: these types always marshal.
		return ""
	}
	return string(b)
}
