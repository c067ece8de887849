package bundlereader

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// A repository names no agent Bundle and sets none of fleet's labels: the
// read fails naming the file, line and field, as other fleet.yaml errors do.
func TestReservedNamesAndLabels(t *testing.T) {
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n"
	cases := []struct {
		name, base string
		files      map[string]string
		wantErr    []string
	}{{
		name: "name of an agent Bundle", base: "repo",
		files:   map[string]string{"app/fleet.yaml": "defaultNamespace: x\nname: fleet-agent-victim\n", "app/cm.yaml": cm},
		wantErr: []string{"app/fleet.yaml: line 2: name:", `"fleet-agent-victim"`, `begins with "fleet-agent-"`, "choose another name"},
	}, {
		name: "a label of fleet's domain", base: "repo",
		files:   map[string]string{"app/fleet.yaml": "labels:\n  team: a\n  fleet.cattle.io/repo-name: trusted\n", "app/cm.yaml": cm},
		wantErr: []string{"app/fleet.yaml: line 3: labels:", `"fleet.cattle.io/repo-name" is reserved`},
	}, {
		name: "a label of a subdomain of fleet's domain", base: "repo",
		files:   map[string]string{"fleet.yaml": "labels: {x.fleet.cattle.io/y: z}\n", "cm.yaml": cm},
		wantErr: []string{"fleet.yaml: line 1: labels:", `"x.fleet.cattle.io/y" is reserved`},
	}, {
		name: "a name made from the GitRepo's name", base: "fleet-agent-victim",
		files:   map[string]string{"cm.yaml": cm},
		wantErr: []string{`fleet.yaml: bundle name "fleet-agent-victim", made from the name "fleet-agent-victim"`, "set another name: in fleet.yaml"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Read(context.Background(), tree(t, tc.files), nil, Options{Name: tc.base, Namespace: "ns"})
			g.Expect(err).To(HaveOccurred())
			g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonInvalidBundle))
			for _, w := range tc.wantErr {
				g.Expect(err.Error()).To(ContainSubstring(w))
			}
		})
	}

	g := NewWithT(t)
	bs, err := Read(context.Background(), tree(t, map[string]string{
		"fleet.yaml": "name: my-fleet-agent-notes\nlabels: {example.com/fleet.cattle.io: x}\n", "cm.yaml": cm,
	}), nil, Options{Name: "repo", Namespace: "ns", Labels: map[string]string{fleet.RepoLabel: "repo"}})
	g.Expect(err).NotTo(HaveOccurred(), "names and keys merely holding the words are the repository's")
	g.Expect(bundleNames(bs)).To(Equal([]string{"my-fleet-agent-notes"}))
	g.Expect(bs[0].Labels).To(HaveKeyWithValue(fleet.RepoLabel, "repo"), "the options' own labels are fleet's")
}
