package restriction

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// TestTargetNamespace: denials begin with Fleet's own texts, on which
// Fleet's UI, alerts and tests match, and then say what to do.
func TestTargetNamespace(t *testing.T) {
	res := &fleet.GitRepoRestriction{ObjectMeta: metav1.ObjectMeta{Name: "team-only"}, AllowedTargetNamespaces: []string{"team", "team-2"}}
	for name, tc := range map[string]struct {
		res      *fleet.GitRepoRestriction
		ns       string
		required bool
		want     string
	}{
		"allowed":                     {res: res, ns: "team-2", required: true},
		"no list allows anything":     {res: &fleet.GitRepoRestriction{}, ns: "kube-system", required: true},
		"no list allows empty":        {res: &fleet.GitRepoRestriction{}, required: true},
		"empty where it may be empty": {res: res},
		"disallowed": {res: res, ns: "kube-system", required: true,
			want: "disallowed targetNamespace kube-system: GitRepoRestriction team-only allows one of team, team-2: set spec.targetNamespace to one of them"},
		"empty where required": {res: res, required: true,
			want: "empty targetNamespace denied, because allowedTargetNamespaces restriction is present: GitRepoRestriction team-only allows one of team, team-2: set spec.targetNamespace"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := TargetNamespace(tc.res, "spec.targetNamespace", tc.ns, tc.required)
			if tc.want == "" {
				g.Expect(err).NotTo(HaveOccurred())
				return
			}
			g.Expect(err).To(MatchError(tc.want))
		})
	}
}
