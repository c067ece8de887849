// Package restriction holds the checks of a GitRepoRestriction that the
// GitRepo and HelmOp controllers both apply, so that the rules a tenant
// cannot get around (allowed lists, repository patterns matched as a whole)
// are written once.
package restriction

import (
	"fmt"
	"regexp"
	"slices"
	"strings"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

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
