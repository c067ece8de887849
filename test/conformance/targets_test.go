package conformance_test

import (
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// A bundle's targets and target restrictions, as Fleet's bundlereader
// (read.go) computes them: fleet.yaml's targets, then its
// targetCustomizations, unnamed ones named target000, target001, ... by
// their place in that list; then fleet.yaml's overrideTargets when it has
// the key, else the GitRepo's targets (the targets file Fleet's GitRepo job
// passes to `fleet apply --targets-file`, which holds the GitRepo's targets
// as targets and again as targetRestrictions, or the default target for a
// GitRepo without targets); and the default target {name: default,
// clusterGroup: default} only when that leaves none. overrideTargets are
// copied to targetRestrictions, with names as given.
func TestTargets(t *testing.T) {
	prod := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}
	all := &metav1.LabelSelector{}
	// What Fleet's GitRepo job writes for targets [{name: all, clusterSelector: {}}, {clusterGroup: edge}].
	repoTargets := `{"targets":[{"name":"all","clusterSelector":{}},{"clusterGroup":"edge"}],` +
		`"targetRestrictions":[{"name":"all","clusterSelector":{}},{"clusterGroup":"edge"}]}`
	// What it writes for a GitRepo without targets.
	defaultRepoTargets := `{"targets":[{"name":"default","clusterGroup":"default"}],` +
		`"targetRestrictions":[{"name":"default","clusterGroup":"default"}]}`
	cases := []struct {
		name             string
		fleetYAML        string
		targetsFile      string
		wantTargets      []fleet.BundleTarget
		wantRestrictions []fleet.BundleTargetRestriction
	}{{
		name:        "neither fleet.yaml nor a GitRepo: the default target",
		wantTargets: []fleet.BundleTarget{{Name: "default", ClusterGroup: "default"}},
	}, {
		name: "targetCustomizations alone: exactly those, unnamed ones numbered",
		fleetYAML: "targetCustomizations:\n- name: prod\n  clusterSelector: {matchLabels: {env: prod}}\n  helm: {values: {replicas: 3}}\n" +
			"- clusterName: c1\n  doNotDeploy: true\n",
		wantTargets: []fleet.BundleTarget{
			{Name: "prod", ClusterSelector: prod, BundleDeploymentOptions: fleet.BundleDeploymentOptions{
				Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]interface{}{"replicas": float64(3)}}}}},
			{Name: "target001", ClusterName: "c1", DoNotDeploy: true},
		},
	}, {
		name:      "fleet.yaml targets come first, then the customizations, numbered together",
		fleetYAML: "targets:\n- clusterGroup: g\ntargetCustomizations:\n- name: x\n  clusterName: x\n- clusterGroup: h\n",
		wantTargets: []fleet.BundleTarget{
			{Name: "target000", ClusterGroup: "g"},
			{Name: "x", ClusterName: "x"},
			{Name: "target002", ClusterGroup: "h"},
		},
	}, {
		name:        "GitRepo targets follow the customizations and are the restrictions, names as given",
		fleetYAML:   "targetCustomizations:\n- name: prod\n  clusterSelector: {matchLabels: {env: prod}}\n",
		targetsFile: repoTargets,
		wantTargets: []fleet.BundleTarget{
			{Name: "prod", ClusterSelector: prod},
			{Name: "all", ClusterSelector: all},
			{ClusterGroup: "edge"},
		},
		wantRestrictions: []fleet.BundleTargetRestriction{
			{Name: "all", ClusterSelector: all},
			{ClusterGroup: "edge"},
		},
	}, {
		name:        "a GitRepo without targets: the default target and restriction after the customizations",
		fleetYAML:   "targetCustomizations:\n- name: prod\n  clusterSelector: {matchLabels: {env: prod}}\n",
		targetsFile: defaultRepoTargets,
		wantTargets: []fleet.BundleTarget{
			{Name: "prod", ClusterSelector: prod},
			{Name: "default", ClusterGroup: "default"},
		},
		wantRestrictions: []fleet.BundleTargetRestriction{{Name: "default", ClusterGroup: "default"}},
	}, {
		name: "overrideTargets replace the GitRepo's targets and restrictions, customizations stay",
		fleetYAML: "targetCustomizations:\n- name: c\n  clusterName: c\n" +
			"overrideTargets:\n- name: o\n  clusterGroup: og\n- clusterSelector: {matchLabels: {env: prod}}\n",
		targetsFile: repoTargets,
		wantTargets: []fleet.BundleTarget{
			{Name: "c", ClusterName: "c"},
			{Name: "o", ClusterGroup: "og"},
			{ClusterSelector: prod},
		},
		wantRestrictions: []fleet.BundleTargetRestriction{
			{Name: "o", ClusterGroup: "og"},
			{ClusterSelector: prod},
		},
	}, {
		name:        "an empty overrideTargets drops the GitRepo's targets: the default target, unrestricted",
		fleetYAML:   "overrideTargets: []\n",
		targetsFile: repoTargets,
		wantTargets: []fleet.BundleTarget{{Name: "default", ClusterGroup: "default"}},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			dir := repo(t, map[string]string{"app/fleet.yaml": tc.fleetYAML, "app/cm.yaml": configMap})
			args := []string{"repo", "app"}
			if tc.targetsFile != "" {
				file := filepath.Join(t.TempDir(), "targets.yaml")
				g.Expect(os.WriteFile(file, []byte(tc.targetsFile), 0o644)).To(Succeed())
				args = append([]string{"--targets-file", file}, args...)
			}
			got := apply(t, dir, args...)
			g.Expect(got.Err).NotTo(HaveOccurred())
			g.Expect(got.names()).To(Equal([]string{"repo-app"}))
			b := got.Bundles[0]
			g.Expect(b.Spec.Targets).To(Equal(tc.wantTargets))
			g.Expect(b.Spec.TargetRestrictions).To(Equal(tc.wantRestrictions))
			g.Expect(resourceNames(b)).To(Equal([]string{"cm.yaml"}))
		})
	}
}
