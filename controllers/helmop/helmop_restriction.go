package helmop

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
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
	if err := allowed(res, "serviceAccount", spec.ServiceAccount, res.AllowedServiceAccounts); err != nil {
		return err
	}
	if spec.HelmSecretName != "" {
		if err := allowed(res, "helmSecretName", spec.HelmSecretName, res.AllowedClientSecretNames); err != nil {
			return err
		}
	}
	if len(res.AllowedTargetNamespaces) > 0 {
		if spec.TargetNamespace == "" {
			return fmt.Errorf("GitRepoRestriction %s requires namespace, one of %s: set spec.namespace",
				res.Name, strings.Join(res.AllowedTargetNamespaces, ", "))
		}
		if err := allowed(res, "namespace", spec.TargetNamespace, res.AllowedTargetNamespaces); err != nil {
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
			if err := allowed(res, field+".serviceAccount", t.ServiceAccount, res.AllowedServiceAccounts); err != nil {
				return err
			}
		}
		if t.TargetNamespace != "" && len(res.AllowedTargetNamespaces) > 0 {
			if err := allowed(res, field+".namespace", t.TargetNamespace, res.AllowedTargetNamespaces); err != nil {
				return err
			}
		}
		if t.Helm != nil && (t.Helm.Repo != "" || strings.Contains(t.Helm.Chart, "://")) {
			urls = append(urls, chartURL(t.Helm))
		}
	}
	return allowedURLs(res, urls)
}

// allowedURLs checks each chart URL against the restriction's
// allowedRepoPatterns, which must match it as a whole.
func allowedURLs(res *fleet.GitRepoRestriction, urls []string) error {
	if len(res.AllowedRepoPatterns) == 0 {
		return nil
	}
	var res2 []*regexp.Regexp
	for _, p := range res.AllowedRepoPatterns {
		re, err := regexp.Compile(`^(?:` + p + `)$`)
		if err != nil {
			return fmt.Errorf("GitRepoRestriction %s: allowedRepoPatterns %q is not a regular expression (%v): ask its owner to fix it", res.Name, p, err)
		}
		res2 = append(res2, re)
	}
	for _, u := range urls {
		if !slices.ContainsFunc(res2, func(re *regexp.Regexp) bool { return re.MatchString(u) }) {
			return fmt.Errorf("GitRepoRestriction %s does not allow chart repository %s: it must match one of the allowedRepoPatterns %s as a whole",
				res.Name, u, strings.Join(res.AllowedRepoPatterns, ", "))
		}
	}
	return nil
}

func allowed(res *fleet.GitRepoRestriction, field, value string, list []string) error {
	if len(list) == 0 || slices.Contains(list, value) {
		return nil
	}
	shown := value
	if shown == "" {
		shown = "(none)"
	}
	return fmt.Errorf("GitRepoRestriction %s does not allow %s %s: use one of %s", res.Name, field, shown, strings.Join(list, ", "))
}
