package dashboard

import (
	"html/template"
	"net/url"
	"strings"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

var funcs = template.FuncMap{
	"class": func(state any) string {
		switch s := state.(type) {
		case fleet.BundleState:
			return Class(s)
		case string:
			if s == fleet.ClusterStateOffline {
				return "err"
			}
			return Class(fleet.BundleState(s))
		}
		return "none"
	},
	// qset is the current query with k set to v (removed when empty); any
	// change but the page's goes back to page 1.
	"qset": func(q url.Values, k, v string) template.URL {
		n := url.Values{}
		for key, vals := range q {
			n[key] = append([]string(nil), vals...)
		}
		if k != "page" {
			n.Del("page")
		}
		if v == "" {
			n.Del(k)
		} else {
			n.Set(k, v)
		}
		if len(n) == 0 {
			return "?"
		}
		return template.URL("?" + n.Encode()) //nolint:gosec // G203: an encoded query, from url.Values
	},
	"join":        strings.Join,
	"abbrev":      abbrev,
	"add":         func(a, b int) int { return a + b },
	"bundleLink":  bundleLink,
	"clusterLink": clusterLink,
}

// abbrev is the short text of a matrix cell (its colour and title say the
// rest; the text keeps it readable without colour).
func abbrev(s fleet.BundleState) string {
	switch s {
	case fleet.Ready:
		return "✓"
	case fleet.ErrApplied:
		return "✗"
	case fleet.NotReady:
		return "!"
	case fleet.Modified:
		return "M"
	case fleet.OutOfSync:
		return "S"
	case fleet.WaitApplied, fleet.Pending:
		return "…"
	}
	return "·"
}
