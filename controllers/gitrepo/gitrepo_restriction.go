package gitrepo

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/gitfetch"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/restriction"
)

// restrict applies the GitRepoRestrictions of the GitRepo's namespace, as
// Fleet does: it returns a copy of the GitRepo whose spec has the defaults
// filled in, or a Stalling error (fleet.ReasonRestricted) naming the rule the
// GitRepo breaks. Every restriction of the namespace applies.
func (r *Reconciler) restrict(ctx context.Context, repo *fleet.GitRepo) (*fleet.GitRepo, error) {
	list := &fleet.GitRepoRestrictionList{}
	if err := r.Client.List(ctx, list, client.InNamespace(repo.Namespace)); err != nil {
		return nil, fmt.Errorf("listing the GitRepoRestrictions of namespace %s: %w", repo.Namespace, err)
	}
	eff := repo.DeepCopy()
	for i := range list.Items {
		if err := applyRestriction(&list.Items[i], &eff.Spec); err != nil {
			return nil, outcome.Stall(fleet.ReasonRestricted, err)
		}
	}
	return eff, nil
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
	if len(res.AllowedTargetNamespaces) > 0 {
		if spec.TargetNamespace == "" {
			return fmt.Errorf("GitRepoRestriction %s requires targetNamespace, one of %s: set spec.targetNamespace",
				res.Name, strings.Join(res.AllowedTargetNamespaces, ", "))
		}
		if err := restriction.Allowed(res, "targetNamespace", spec.TargetNamespace, res.AllowedTargetNamespaces); err != nil {
			return err
		}
	}
	return restriction.AllowedRepo(res, "repo", spec.Repo)
}

// restrictionToGitRepos maps a GitRepoRestriction to the GitRepos of its
// namespace, so that a changed restriction is applied at once.
func (r *Reconciler) restrictionToGitRepos(ctx context.Context, o client.Object) []reconcile.Request {
	repos := &fleet.GitRepoList{}
	if err := r.Client.List(ctx, repos, client.InNamespace(o.GetNamespace())); err != nil {
		// The cache only fails before it has synced; the GitRepos are then
		// reconciled from scratch anyway.
		return nil
	}
	reqs := make([]reconcile.Request, 0, len(repos.Items))
	for i := range repos.Items {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&repos.Items[i])})
	}
	return reqs
}
