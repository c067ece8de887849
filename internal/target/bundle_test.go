package target

import (
	"fmt"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func sel(kv ...string) *metav1.LabelSelector {
	s := &metav1.LabelSelector{MatchLabels: map[string]string{}}
	for i := 0; i+1 < len(kv); i += 2 {
		s.MatchLabels[kv[i]] = kv[i+1]
	}
	return s
}

func bundle(targets ...fleet.BundleTarget) *fleet.Bundle {
	return &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "b", Namespace: "fleet-default", UID: "uid-1", Generation: 3},
		Spec:       fleet.BundleSpec{Targets: targets},
	}
}

func values(m map[string]interface{}) *fleet.HelmOptions {
	return &fleet.HelmOptions{Values: &fleet.GenericMap{Data: m}}
}

// prod is in group "prod-eu" (labels tier=prod) and "all" (no labels).
var prod = &ClusterInfo{
	Name:      "prod-1",
	Namespace: "fleet-default",
	Labels:    map[string]string{"env": "prod", "region": "eu"},
	Groups: []GroupInfo{
		{Name: "prod-eu", Labels: map[string]string{"tier": "prod"}},
		{Name: "all"},
	},
}

var dev = &ClusterInfo{
	Name:      "dev-1",
	Namespace: "fleet-default",
	Labels:    map[string]string{"env": "dev"},
}

func TestMatchCriteria(t *testing.T) {
	tests := []struct {
		name   string
		target fleet.BundleTarget
		match  bool
	}{
		{"clusterName equal", fleet.BundleTarget{ClusterName: "prod-1"}, true},
		{"clusterName different", fleet.BundleTarget{ClusterName: "prod-2"}, false},
		{"clusterSelector matches", fleet.BundleTarget{ClusterSelector: sel("env", "prod")}, true},
		{"clusterSelector does not match", fleet.BundleTarget{ClusterSelector: sel("env", "dev")}, false},
		{"empty clusterSelector matches all", fleet.BundleTarget{ClusterSelector: &metav1.LabelSelector{}}, true},
		{"clusterSelector expression", fleet.BundleTarget{ClusterSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "region", Operator: metav1.LabelSelectorOpIn, Values: []string{"us", "eu"}}},
		}}, true},
		{"clusterSelector NotIn", fleet.BundleTarget{ClusterSelector: &metav1.LabelSelector{
			MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"prod"}}},
		}}, false},
		{"clusterGroup member", fleet.BundleTarget{ClusterGroup: "all"}, true},
		{"clusterGroup not member", fleet.BundleTarget{ClusterGroup: "default"}, false},
		{"clusterGroupSelector matches a group", fleet.BundleTarget{ClusterGroupSelector: sel("tier", "prod")}, true},
		{"clusterGroupSelector matches no group", fleet.BundleTarget{ClusterGroupSelector: sel("tier", "dev")}, false},
		{"clusterGroup and clusterGroupSelector on the same group", fleet.BundleTarget{ClusterGroup: "prod-eu", ClusterGroupSelector: sel("tier", "prod")}, true},
		{"clusterGroup and clusterGroupSelector on different groups", fleet.BundleTarget{ClusterGroup: "all", ClusterGroupSelector: sel("tier", "prod")}, false},
		{"every criterion matches", fleet.BundleTarget{ClusterName: "prod-1", ClusterSelector: sel("env", "prod"), ClusterGroup: "prod-eu", ClusterGroupSelector: sel("tier", "prod")}, true},
		{"one criterion of several fails", fleet.BundleTarget{ClusterName: "prod-1", ClusterSelector: sel("env", "dev")}, false},
		{"empty target matches nothing", fleet.BundleTarget{Name: "empty"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			tt.target.Name = "t"
			cb, err := Compile(bundle(tt.target))
			g.Expect(err).NotTo(HaveOccurred())
			r, ok := cb.Match(prod)
			g.Expect(ok).To(Equal(tt.match))
			if tt.match {
				g.Expect(r.Target).To(Equal("t"))
			} else {
				g.Expect(r).To(BeNil())
			}
		})
	}
}

func TestMatchClusterWithoutGroups(t *testing.T) {
	g := NewWithT(t)
	cb, err := Compile(bundle(
		fleet.BundleTarget{Name: "group", ClusterGroupSelector: &metav1.LabelSelector{}},
	))
	g.Expect(err).NotTo(HaveOccurred())
	_, ok := cb.Match(dev)
	g.Expect(ok).To(BeFalse(), "a group criterion needs a group, even one selecting all")
	_, ok = cb.Match(prod)
	g.Expect(ok).To(BeTrue())
}

func TestMatchOrderAndDoNotDeploy(t *testing.T) {
	tests := []struct {
		name    string
		targets []fleet.BundleTarget
		cluster *ClusterInfo
		want    string // "" when not targeted
		// allMatchesExcludes: in AllMatches mode the cluster is left out.
		allMatchesExcludes bool
	}{
		{
			name:    "no targets",
			cluster: prod,
		},
		{
			name: "first match wins",
			targets: []fleet.BundleTarget{
				{Name: "dev", ClusterSelector: sel("env", "dev")},
				{Name: "eu", ClusterSelector: sel("region", "eu")},
				{Name: "prod", ClusterSelector: sel("env", "prod")},
			},
			cluster: prod,
			want:    "eu",
		},
		{
			name: "doNotDeploy first match excludes",
			targets: []fleet.BundleTarget{
				{Name: "not-prod", ClusterSelector: sel("env", "prod"), DoNotDeploy: true},
				{Name: "all", ClusterSelector: &metav1.LabelSelector{}},
			},
			cluster: prod,
		},
		{
			name: "doNotDeploy that does not match leaves others",
			targets: []fleet.BundleTarget{
				{Name: "not-prod", ClusterSelector: sel("env", "prod"), DoNotDeploy: true},
				{Name: "all", ClusterSelector: &metav1.LabelSelector{}},
			},
			cluster: dev,
			want:    "all",
		},
		{
			name: "doNotDeploy after the first match excludes in AllMatches mode only",
			targets: []fleet.BundleTarget{
				{Name: "all", ClusterSelector: &metav1.LabelSelector{}},
				{Name: "not-prod", ClusterSelector: sel("env", "prod"), DoNotDeploy: true},
			},
			cluster:            prod,
			want:               "all",
			allMatchesExcludes: true,
		},
		{
			name: "empty target is skipped",
			targets: []fleet.BundleTarget{
				{Name: "empty", DoNotDeploy: true},
				{Name: "by-name", ClusterName: "dev-1"},
			},
			cluster: dev,
			want:    "by-name",
		},
	}
	for _, mode := range []fleet.TargetCustomizationMode{"", fleet.FirstMatch, fleet.AllMatches} {
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/%s", mode, tt.name), func(t *testing.T) {
				g := NewWithT(t)
				b := bundle(tt.targets...)
				b.Spec.TargetCustomizationMode = mode
				cb, err := Compile(b)
				g.Expect(err).NotTo(HaveOccurred())
				r, ok := cb.Match(tt.cluster)
				if mode == fleet.AllMatches && tt.allMatchesExcludes {
					g.Expect(ok).To(BeFalse())
					return
				}
				g.Expect(ok).To(Equal(tt.want != ""))
				if ok {
					g.Expect(r.Target).To(Equal(tt.want))
				}
			})
		}
	}
}

func TestMatchRestrictions(t *testing.T) {
	all := fleet.BundleTarget{Name: "all", ClusterSelector: &metav1.LabelSelector{}}
	tests := []struct {
		name         string
		restrictions []fleet.BundleTargetRestriction
		prod, dev    bool
	}{
		{name: "none", prod: true, dev: true},
		{
			name:         "one restriction",
			restrictions: []fleet.BundleTargetRestriction{{Name: "prod", ClusterSelector: sel("env", "prod")}},
			prod:         true,
		},
		{
			name: "any restriction is enough",
			restrictions: []fleet.BundleTargetRestriction{
				{Name: "group", ClusterGroup: "prod-eu"},
				{Name: "dev", ClusterName: "dev-1"},
			},
			prod: true, dev: true,
		},
		{
			name:         "group selector restriction",
			restrictions: []fleet.BundleTargetRestriction{{ClusterGroupSelector: sel("tier", "prod")}},
			prod:         true,
		},
		{
			name:         "empty restriction matches nothing",
			restrictions: []fleet.BundleTargetRestriction{{Name: "empty"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			b := bundle(all)
			b.Spec.TargetRestrictions = tt.restrictions
			cb, err := Compile(b)
			g.Expect(err).NotTo(HaveOccurred())
			_, ok := cb.Match(prod)
			g.Expect(ok).To(Equal(tt.prod), "prod")
			_, ok = cb.Match(dev)
			g.Expect(ok).To(Equal(tt.dev), "dev")
		})
	}
}

func TestCompileErrors(t *testing.T) {
	bad := &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}
	badOp := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Near"}}}
	tests := []struct {
		name   string
		bundle *fleet.Bundle
		err    string
	}{
		{"target clusterSelector", bundle(fleet.BundleTarget{Name: "prod", ClusterSelector: bad}), `target "prod": clusterSelector: `},
		{"target clusterGroupSelector", bundle(fleet.BundleTarget{Name: "prod", ClusterGroupSelector: badOp}), `target "prod": clusterGroupSelector: `},
		{"unnamed target", bundle(fleet.BundleTarget{ClusterName: "a"}, fleet.BundleTarget{ClusterSelector: bad}), `target #1: clusterSelector: `},
		{"restriction", func() *fleet.Bundle {
			b := bundle(fleet.BundleTarget{ClusterName: "a"})
			b.Spec.TargetRestrictions = []fleet.BundleTargetRestriction{{Name: "r", ClusterSelector: badOp}}
			return b
		}(), `targetRestriction "r": clusterSelector: `},
		{"mode", func() *fleet.Bundle {
			b := bundle()
			b.Spec.TargetCustomizationMode = "SomeMatches"
			return b
		}(), `targetCustomizationMode "SomeMatches"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			_, err := Compile(tt.bundle)
			g.Expect(err).To(MatchError(HavePrefix(tt.err)))
		})
	}
}

func TestMatchOptionsFirstMatch(t *testing.T) {
	g := NewWithT(t)
	b := bundle(
		fleet.BundleTarget{Name: "eu", ClusterSelector: sel("region", "eu"), BundleDeploymentOptions: fleet.BundleDeploymentOptions{
			Helm: values(map[string]interface{}{"region": "eu", "image": map[string]interface{}{"tag": "eu"}}),
		}},
		fleet.BundleTarget{Name: "prod", ClusterSelector: sel("env", "prod"), BundleDeploymentOptions: fleet.BundleDeploymentOptions{
			DefaultNamespace: "prod",
		}},
	)
	b.Spec.DefaultNamespace = "app"
	b.Spec.Helm = values(map[string]interface{}{"replicas": 1.0, "image": map[string]interface{}{"repo": "r", "tag": "v1"}})
	cb, err := Compile(b)
	g.Expect(err).NotTo(HaveOccurred())

	r, ok := cb.Match(prod)
	g.Expect(ok).To(BeTrue())
	g.Expect(r.Target).To(Equal("eu"))
	g.Expect(r.Targets).To(Equal([]string{"eu"}))
	g.Expect(r.Options.DefaultNamespace).To(Equal("app"), "only the first match customizes")
	g.Expect(r.Options.Helm.Values.Data).To(Equal(map[string]interface{}{
		"replicas": 1.0, "region": "eu", "image": map[string]interface{}{"repo": "r", "tag": "eu"},
	}))

	// The Result is compiled: same pointer every time, and independent of b.
	again, _ := cb.Match(prod)
	g.Expect(again).To(BeIdenticalTo(r))
	b.Spec.Helm.Values.Data["replicas"] = 5.0
	b.Spec.Targets[0].Helm.Values.Data["region"] = "us"
	g.Expect(r.Options.Helm.Values.Data["replicas"]).To(Equal(1.0))
	g.Expect(r.Options.Helm.Values.Data["region"]).To(Equal("eu"))
}

func TestMatchOptionsAllMatches(t *testing.T) {
	g := NewWithT(t)
	b := bundle(
		fleet.BundleTarget{Name: "eu", ClusterSelector: sel("region", "eu"), BundleDeploymentOptions: fleet.BundleDeploymentOptions{
			DefaultNamespace: "eu",
			Helm:             values(map[string]interface{}{"region": "eu", "image": map[string]interface{}{"tag": "eu"}}),
		}},
		fleet.BundleTarget{Name: "skip-prod-2", ClusterName: "prod-2", DoNotDeploy: true, BundleDeploymentOptions: fleet.BundleDeploymentOptions{
			ServiceAccount: "never",
		}},
		fleet.BundleTarget{Name: "dev", ClusterSelector: sel("env", "dev"), BundleDeploymentOptions: fleet.BundleDeploymentOptions{
			ServiceAccount: "dev",
		}},
		fleet.BundleTarget{Name: "prod", ClusterSelector: sel("env", "prod"), BundleDeploymentOptions: fleet.BundleDeploymentOptions{
			DefaultNamespace: "prod",
			Helm:             values(map[string]interface{}{"image": map[string]interface{}{"tag": "prod"}}),
		}},
	)
	b.Spec.TargetCustomizationMode = fleet.AllMatches
	b.Spec.Helm = values(map[string]interface{}{"image": map[string]interface{}{"repo": "r", "tag": "v1"}})
	cb, err := Compile(b)
	g.Expect(err).NotTo(HaveOccurred())

	r, ok := cb.Match(prod)
	g.Expect(ok).To(BeTrue())
	g.Expect(r.Target).To(Equal("eu"))
	g.Expect(r.Targets).To(Equal([]string{"eu", "prod"}))
	g.Expect(r.Options.DefaultNamespace).To(Equal("prod"), "later matches win")
	g.Expect(r.Options.ServiceAccount).To(BeEmpty())
	g.Expect(r.Options.Helm.Values.Data).To(Equal(map[string]interface{}{
		"region": "eu", "image": map[string]interface{}{"repo": "r", "tag": "prod"},
	}))
	again, _ := cb.Match(prod)
	g.Expect(again).To(BeIdenticalTo(r), "results are cached by the set of matching targets")

	r, ok = cb.Match(dev)
	g.Expect(ok).To(BeTrue())
	g.Expect(r.Targets).To(Equal([]string{"dev"}))
	g.Expect(r.Options.ServiceAccount).To(Equal("dev"))

	// As in Fleet, any matching doNotDeploy target leaves the cluster out,
	// wherever it stands.
	prod2 := *prod
	prod2.Name = "prod-2"
	_, ok = cb.Match(&prod2)
	g.Expect(ok).To(BeFalse(), "a later matching doNotDeploy target leaves the cluster out")
}

func TestMatchAllMatchesManyTargets(t *testing.T) {
	g := NewWithT(t)
	targets := make([]fleet.BundleTarget, 0, 70)
	for i := range 70 {
		targets = append(targets, fleet.BundleTarget{
			Name:            fmt.Sprintf("t%d", i),
			ClusterSelector: sel("env", "prod"),
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{
				Helm: values(map[string]interface{}{fmt.Sprintf("k%d", i): float64(i), "last": float64(i)}),
			},
		})
	}
	b := bundle(targets...)
	b.Spec.TargetCustomizationMode = fleet.AllMatches
	cb, err := Compile(b)
	g.Expect(err).NotTo(HaveOccurred())
	r, ok := cb.Match(prod)
	g.Expect(ok).To(BeTrue())
	g.Expect(r.Targets).To(HaveLen(70))
	g.Expect(r.Options.Helm.Values.Data).To(HaveLen(71))
	g.Expect(r.Options.Helm.Values.Data["last"]).To(Equal(69.0))
}

func TestUpToDate(t *testing.T) {
	g := NewWithT(t)
	b := bundle()
	cb, err := Compile(b)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cb.UpToDate(b)).To(BeTrue())
	b2 := b.DeepCopy()
	b2.Generation++
	g.Expect(cb.UpToDate(b2)).To(BeFalse())
	b3 := b.DeepCopy()
	b3.UID = "other"
	g.Expect(cb.UpToDate(b3)).To(BeFalse())

	// Without a generation (not from an API server), resourceVersion counts.
	local := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{ResourceVersion: "1"}}
	cl, err := Compile(local)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cl.UpToDate(local)).To(BeTrue())
	local.ResourceVersion = "2"
	g.Expect(cl.UpToDate(local)).To(BeFalse())
}
