package target

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func group(name, ns string, selector *metav1.LabelSelector, lbls map[string]string) *fleet.ClusterGroup {
	return &fleet.ClusterGroup{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: lbls},
		Spec:       fleet.ClusterGroupSpec{Selector: selector},
	}
}

func TestCompileGroupMatches(t *testing.T) {
	tests := []struct {
		name     string
		selector *metav1.LabelSelector
		labels   map[string]string
		match    bool
	}{
		{"nil selector matches nothing", nil, map[string]string{"env": "prod"}, false},
		{"empty selector matches everything", &metav1.LabelSelector{}, nil, true},
		{"matchLabels", sel("env", "prod"), map[string]string{"env": "prod", "x": "y"}, true},
		{"matchLabels mismatch", sel("env", "prod"), map[string]string{"env": "dev"}, false},
		{"Exists", &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: "gpu", Operator: metav1.LabelSelectorOpExists},
		}}, map[string]string{"gpu": ""}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			cg, err := CompileGroup(group("g", "ns", tt.selector, nil))
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(cg.Matches(tt.labels)).To(Equal(tt.match))
		})
	}
}

func TestCompileGroupInvalid(t *testing.T) {
	g := NewWithT(t)
	_, err := CompileGroup(group("g", "ns", &metav1.LabelSelector{MatchLabels: map[string]string{"a": "not valid!"}}, nil))
	g.Expect(err).To(MatchError(HavePrefix("clustergroup ns/g: selector: ")))
}

func TestClusterInfoFor(t *testing.T) {
	g := NewWithT(t)
	groups := make([]*CompiledGroup, 0, 4)
	for _, cg := range []*fleet.ClusterGroup{
		group("prod", "fleet-default", sel("env", "prod"), map[string]string{"tier": "prod"}),
		group("all", "fleet-default", &metav1.LabelSelector{}, nil),
		group("none", "fleet-default", nil, nil),
		group("other-ns", "fleet-local", &metav1.LabelSelector{}, nil),
	} {
		c, err := CompileGroup(cg)
		g.Expect(err).NotTo(HaveOccurred())
		groups = append(groups, c)
	}
	cluster := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{
		Name: "c1", Namespace: "fleet-default", Labels: map[string]string{"env": "prod"},
	}}
	info := ClusterInfoFor(cluster, groups)
	g.Expect(info).To(Equal(&ClusterInfo{
		Name:      "c1",
		Namespace: "fleet-default",
		Labels:    map[string]string{"env": "prod"},
		Groups: []GroupInfo{
			{Name: "prod", Labels: map[string]string{"tier": "prod"}},
			{Name: "all"},
		},
	}))
}
