package helmop

import (
	"context"
	"fmt"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
	"github.com/gitfleet/fleet/internal/restriction"
)

// restrict applies the GitRepoRestrictions of the HelmOp's namespace, as
// they apply to a GitRepo there: it returns a copy of the HelmOp with the
// default service account filled in, or a Stalling error
// (fleet.ReasonRestricted) naming the rule it breaks. Every restriction of
// the namespace applies. For a HelmOp, allowedRepoPatterns match the chart's
// URL (helm.repo, or helm.chart when it is a URL, and those of the
// targets), and allowedClientSecretNames the helmSecretName: a tenant cannot
// make the manager send a Secret of the namespace to a host it chose.
func (r *Reconciler) restrict(ctx context.Context, op *fleet.HelmOp) (*fleet.HelmOp, error) {
	list := &fleet.GitRepoRestrictionList{}
	if err := r.Client.List(ctx, list, client.InNamespace(op.Namespace)); err != nil {
		return nil, fmt.Errorf("listing the GitRepoRestrictions of namespace %s: %w", op.Namespace, err)
	}
	eff := op.DeepCopy()
	for i := range list.Items {
		if err := applyRestriction(&list.Items[i], &eff.Spec); err != nil {
			return nil, outcome.Stall(fleet.ReasonRestricted, err)
		}
	}
	return eff, nil
}

// applyRestriction fills the default service account of one restriction
// into spec and checks spec, and each of its targets, against the
// restriction's allowed lists; an empty list allows anything.
func applyRestriction(res *fleet.GitRepoRestriction, spec *fleet.HelmOpSpec) error {
	if spec.ServiceAccount == "" {
		spec.ServiceAccount = res.DefaultServiceAccount
	}
	if err := restriction.Allowed(res, "serviceAccount", spec.ServiceAccount, res.AllowedServiceAccounts); err != nil {
		return err
	}
	if spec.HelmSecretName != "" {
		if err := restriction.Allowed(res, "helmSecretName", spec.HelmSecretName, res.AllowedClientSecretNames); err != nil {
			return err
		}
	}
	if len(res.AllowedTargetNamespaces) > 0 {
		if spec.TargetNamespace == "" {
			return fmt.Errorf("GitRepoRestriction %s requires namespace, one of %s: set spec.namespace",
				res.Name, strings.Join(res.AllowedTargetNamespaces, ", "))
		}
		if err := restriction.Allowed(res, "namespace", spec.TargetNamespace, res.AllowedTargetNamespaces); err != nil {
			return err
		}
	}
	urls := []string{}
	if spec.Helm != nil {
		urls = append(urls, chartURL(spec.Helm))
	}
	for i := range spec.Targets {
		t := &spec.Targets[i]
		field := fmt.Sprintf("targets[%d]", i)
		if t.ServiceAccount != "" {
			if err := restriction.Allowed(res, field+".serviceAccount", t.ServiceAccount, res.AllowedServiceAccounts); err != nil {
				return err
			}
		}
		if t.TargetNamespace != "" && len(res.AllowedTargetNamespaces) > 0 {
			if err := restriction.Allowed(res, field+".namespace", t.TargetNamespace, res.AllowedTargetNamespaces); err != nil {
				return err
			}
		}
		if t.Helm != nil && (t.Helm.Repo != "" || strings.Contains(t.Helm.Chart, "://")) {
			urls = append(urls, chartURL(t.Helm))
		}
	}
	for _, u := range urls {
		if err := restriction.AllowedRepo(res, "chart repository", u); err != nil {
			return err
		}
	}
	return nil
}
