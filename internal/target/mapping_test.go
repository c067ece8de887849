package target

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func mapping(ns string, bundleSelector, namespaceSelector *metav1.LabelSelector) *fleet.BundleNamespaceMapping {
	return &fleet.BundleNamespaceMapping{
		ObjectMeta:        metav1.ObjectMeta{Name: "m", Namespace: ns},
		BundleSelector:    bundleSelector,
		NamespaceSelector: namespaceSelector,
	}
}

func TestAllowedNamespaces(t *testing.T) {
	namespaces := map[string]map[string]string{
		"fleet-default": {"kind": "workspace"},
		"team-a":        {"kind": "workspace", "team": "a"},
		"team-b":        {"kind": "workspace", "team": "b"},
		"kube-system":   nil,
	}
	tests := []struct {
		name     string
		mappings []*fleet.BundleNamespaceMapping
		labels   map[string]string
		want     []string
	}{
		{name: "no mappings", want: []string{"fleet-default"}},
		{
			name:     "mapping selects namespaces",
			mappings: []*fleet.BundleNamespaceMapping{mapping("fleet-default", &metav1.LabelSelector{}, sel("kind", "workspace"))},
			want:     []string{"fleet-default", "team-a", "team-b"},
		},
		{
			name:     "bundleSelector must match the bundle",
			mappings: []*fleet.BundleNamespaceMapping{mapping("fleet-default", sel("shared", "true"), sel("kind", "workspace"))},
			want:     []string{"fleet-default"},
		},
		{
			name:     "matching bundle labels",
			mappings: []*fleet.BundleNamespaceMapping{mapping("fleet-default", sel("shared", "true"), sel("team", "a"))},
			labels:   map[string]string{"shared": "true"},
			want:     []string{"fleet-default", "team-a"},
		},
		{
			name:     "mapping of another namespace does not apply",
			mappings: []*fleet.BundleNamespaceMapping{mapping("team-a", &metav1.LabelSelector{}, &metav1.LabelSelector{})},
			want:     []string{"fleet-default"},
		},
		{
			name: "several mappings union",
			mappings: []*fleet.BundleNamespaceMapping{
				mapping("fleet-default", &metav1.LabelSelector{}, sel("team", "a")),
				mapping("fleet-default", &metav1.LabelSelector{}, sel("team", "b")),
			},
			want: []string{"fleet-default", "team-a", "team-b"},
		},
		{
			name:     "unset bundleSelector selects no bundle",
			mappings: []*fleet.BundleNamespaceMapping{mapping("fleet-default", nil, &metav1.LabelSelector{})},
			want:     []string{"fleet-default"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			var compiled []*CompiledMapping
			for _, m := range tt.mappings {
				cm, err := CompileMapping(m)
				g.Expect(err).NotTo(HaveOccurred())
				compiled = append(compiled, cm)
			}
			g.Expect(AllowedNamespaces(compiled, "fleet-default", tt.labels, namespaces)).To(Equal(tt.want))
		})
	}
}

func TestCompileMappingInvalid(t *testing.T) {
	g := NewWithT(t)
	bad := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "a", Operator: "Bad"}}}
	_, err := CompileMapping(mapping("ns", bad, &metav1.LabelSelector{}))
	g.Expect(err).To(MatchError(HavePrefix("bundlenamespacemapping ns/m: bundleSelector: ")))
	_, err = CompileMapping(mapping("ns", &metav1.LabelSelector{}, bad))
	g.Expect(err).To(MatchError(HavePrefix("bundlenamespacemapping ns/m: namespaceSelector: ")))
}
