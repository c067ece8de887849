package gitrepo

import (
	"context"
	"slices"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/gitfetch"
	"github.com/gitfleet/fleet/internal/restriction"
)

// restrict applies the GitRepoRestrictions of the GitRepo's namespace, as
// Fleet does: it returns a copy of the GitRepo whose spec has the defaults
// filled in, or a Stalling error (fleet.ReasonRestricted) naming the rule the
// GitRepo breaks. Every restriction of the namespace applies.
func (r *Reconciler) restrict(ctx context.Context, repo *fleet.GitRepo) (*fleet.GitRepo, error) {
	return restriction.Apply(ctx, r.Client, repo, func(res *fleet.GitRepoRestriction, eff *fleet.GitRepo) error { return applyRestriction(res, &eff.Spec) })
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
	return restriction.AllowedRepo(res, "repo", spec.Repo)
}
