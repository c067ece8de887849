// Package restriction holds the checks of a GitRepoRestriction that the
// GitRepo and HelmOp controllers both apply, so that the rules a tenant
// cannot get around (allowed lists, repository patterns matched as a whole)
// are written once.
package restriction

import (
	"context"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// Apply applies every GitRepoRestriction of obj's namespace, in turn, to a
// copy of obj (a GitRepo, a HelmOp) with apply, which fills one
// restriction's defaults into the copy's spec and checks the spec against
// it; it returns the copy. The first rule broken is returned as a Stalling
// error, reason fleet.ReasonRestricted; a failed list as a transient one.
func Apply[T interface {
	client.Object
	DeepCopy() T
}](ctx context.Context, c client.Reader, obj T, apply func(*fleet.GitRepoRestriction, T) error) (T, error) {
	var none T
	list := &fleet.GitRepoRestrictionList{}
	if err := c.List(ctx, list, client.InNamespace(obj.GetNamespace())); err != nil {
		return none, fmt.Errorf("listing the GitRepoRestrictions of namespace %s: %w", obj.GetNamespace(), err)
	}
	eff := obj.DeepCopy()
	for i := range list.Items {
		if err := apply(&list.Items[i], eff); err != nil {
			return none, outcome.Stall(fleet.ReasonRestricted, err)
		}
	}
	return eff, nil
}

// TargetNamespace checks namespace ns, set in field (spec.targetNamespace,
// targets[0].namespace), against the restriction's
// allowedTargetNamespaces; an empty list allows anything. An empty ns is
// denied when required (the object's own namespace), allowed otherwise (a
// target that keeps it). The errors begin with Fleet's own texts ("empty
// targetNamespace denied, ...", "disallowed targetNamespace X"), on which
// Fleet's UI, alerts and tests match, and go on to say what to do.
func TargetNamespace(res *fleet.GitRepoRestriction, field, ns string, required bool) error {
	allowed := res.AllowedTargetNamespaces
	if len(allowed) == 0 || slices.Contains(allowed, ns) || (ns == "" && !required) {
		return nil
	}
	if ns == "" {
		return fmt.Errorf("empty targetNamespace denied, because allowedTargetNamespaces restriction is present: GitRepoRestriction %s allows one of %s: set %s",
			res.Name, strings.Join(allowed, ", "), field)
	}
	return fmt.Errorf("disallowed targetNamespace %s: GitRepoRestriction %s allows one of %s: set %s to one of them",
		ns, res.Name, strings.Join(allowed, ", "), field)
}

// TargetNamespaceSelected refuses an empty namespace ns, set in field, when
// the restriction has an allowedTargetNamespaceSelector, with Fleet's text:
// the agent checks the selector against one namespace, which the GitRepo
// must name. A selector that is not valid is refused here, naming the
// restriction's field, rather than at every agent.
func TargetNamespaceSelected(res *fleet.GitRepoRestriction, field, ns string) error {
	sel := res.AllowedTargetNamespaceSelector
	if sel == nil {
		return nil
	}
	if _, err := metav1.LabelSelectorAsSelector(sel); err != nil {
		return fmt.Errorf("GitRepoRestriction %s: allowedTargetNamespaceSelector is not a valid label selector (%v): ask its owner to fix it", res.Name, err)
	}
	if ns == "" {
		return fmt.Errorf("empty targetNamespace denied, because allowedTargetNamespaceSelector restriction is present: GitRepoRestriction %s: set %s to a namespace whose labels it selects",
			res.Name, field)
	}
	return nil
}

// Allowed checks value, of the field named field, against list: an empty
// list allows anything.
func Allowed(res *fleet.GitRepoRestriction, field, value string, list []string) error {
	if len(list) == 0 || slices.Contains(list, value) {
		return nil
	}
	shown := value
	if shown == "" {
		shown = "(none)"
	}
	return fmt.Errorf("GitRepoRestriction %s does not allow %s %s: use one of %s", res.Name, field, shown, strings.Join(list, ", "))
}

// AllowedRepo checks url, named what in the error ("repo", "chart
// repository"), against the restriction's allowedRepoPatterns, which must
// match it as a whole (Fleet matches them anywhere in the URL, so
// "github.com/org/" there also allows https://evil.test/github.com/org/).
// No patterns allow anything.
func AllowedRepo(res *fleet.GitRepoRestriction, what, url string) error {
	if len(res.AllowedRepoPatterns) == 0 {
		return nil
	}
	for _, p := range res.AllowedRepoPatterns {
		re, err := regexp.Compile(`^(?:` + p + `)$`)
		if err != nil {
			return fmt.Errorf("GitRepoRestriction %s: allowedRepoPatterns %q is not a regular expression (%v): ask its owner to fix it", res.Name, p, err)
		}
		if re.MatchString(url) {
			return nil
		}
	}
	return fmt.Errorf("GitRepoRestriction %s does not allow %s %s: it must match one of the allowedRepoPatterns %s as a whole",
		res.Name, what, url, strings.Join(res.AllowedRepoPatterns, ", "))
}

// AndSelectors returns a selector that selects what both a and b select
// (nil selects anything), as several GitRepoRestrictions'
// allowedTargetNamespaceSelectors all apply. It shares no memory with them.
func AndSelectors(a, b *metav1.LabelSelector) *metav1.LabelSelector {
	if b == nil {
		return a.DeepCopy()
	}
	if a == nil {
		return b.DeepCopy()
	}
	out := a.DeepCopy()
	for _, k := range slices.Sorted(maps.Keys(b.MatchLabels)) {
		v := b.MatchLabels[k]
		if have, ok := out.MatchLabels[k]; ok && have != v {
			// Both must hold: a namespace cannot, and the selector says so.
			out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{Key: k, Operator: metav1.LabelSelectorOpIn, Values: []string{v}})
			continue
		}
		if out.MatchLabels == nil {
			out.MatchLabels = map[string]string{}
		}
		out.MatchLabels[k] = v
	}
	for _, e := range b.MatchExpressions {
		out.MatchExpressions = append(out.MatchExpressions, *e.DeepCopy())
	}
	return out
}
