package helmop

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
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
//
// The Policies of the namespace apply next (see restriction.Combine), their
// helmOp defaults after the restrictions' (fleet.ReasonPolicyRefused). The
// restrictions' allowedTargetNamespaceSelectors all go into the Bundle's
// options, for the agent to check.
func (r *Reconciler) restrict(ctx context.Context, op *fleet.HelmOp) (*fleet.HelmOp, error) {
	var sel *metav1.LabelSelector
	eff, err := restriction.Apply(ctx, r.Client, op, func(res *fleet.GitRepoRestriction, eff *fleet.HelmOp) error {
		sel = restriction.AndSelectors(sel, res.AllowedTargetNamespaceSelector)
		return applyRestriction(res, &eff.Spec)
	})
	if err != nil {
		return nil, err
	}
	if sel != nil {
		eff.Spec.AllowedTargetNamespaceSelector = sel
	}
	policies, err := restriction.LoadPolicies(ctx, r.Client, op.Namespace)
	if err != nil {
		return nil, err
	}
	if err := policies.HelmOp(&eff.Spec); err != nil {
		return nil, err
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
	if err := restriction.TargetNamespace(res, "spec.namespace", spec.TargetNamespace, true); err != nil {
		return err
	}
	if err := restriction.TargetNamespaceSelected(res, "spec.namespace", spec.TargetNamespace); err != nil {
		return err
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
		if err := restriction.TargetNamespace(res, "spec."+field+".namespace", t.TargetNamespace, false); err != nil {
			return err
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

// fingerprint identifies what the restrictions and Policies made of the
// HelmOp: its effective spec, which the Bundle is written from.
func fingerprint(eff *fleet.HelmOp) string {
	b, err := json.Marshal(eff.Spec)
	if err != nil {
		// Not reached: the spec always marshals.
		return ""
	}
	return string(b)
}
