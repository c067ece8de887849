package diagnose

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/target"
)

// prodCustomization adds to bundle b a customization giving clusters
// labelled env=prod tier: gold.
func prodCustomization(b *fleet.Bundle) {
	b.Spec.Targets = append([]fleet.BundleTarget{{Name: "prod", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
		BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{Values: &fleet.GenericMap{Data: map[string]interface{}{"tier": "gold"}}}}}},
		b.Spec.Targets...)
}

func valuesFindings(s *Snapshot) []Finding {
	findings, _ := Analyze(s, Options{})
	var out []Finding
	for _, f := range findings {
		if f.Check == CheckValuesDiffer {
			out = append(out, f)
		}
	}
	return out
}

func TestValuesRenderDifferently(t *testing.T) {
	cases := []struct {
		name     string
		plant    func(s *Snapshot)
		severity Severity
		object   string
		says     []string
	}{
		{"a cluster label a customization reads, not rendered yet", func(s *Snapshot) {
			prodCustomization(&s.Bundles[1])
			render(s)
			s.Clusters[0].Labels = map[string]string{"env": "prod"}
		}, Warning, "BundleDeployment cluster-a/app", []string{
			`for cluster fleet-default/a the manager would now render other options than the BundleDeployment holds (targets prod)`,
			`helm.values.tier: held "bronze", now "gold"`, "the cluster runs the held ones"}},
		{"not rendered yet, and not applied by the agent yet", func(s *Snapshot) {
			prodCustomization(&s.Bundles[1])
			render(s)
			s.BundleDeployments[2].Status.AppliedDeploymentID = ""
			s.Clusters[0].Labels = map[string]string{"env": "prod"}
		}, Warning, "BundleDeployment cluster-a/app", []string{`helm.values.tier: held "bronze", now "gold"; its agent has applied none yet`}},
		{"a ClusterGroup joined whose customization applies", func(s *Snapshot) {
			b := &s.Bundles[0]
			b.Spec.Targets = append([]fleet.BundleTarget{{Name: "eu", ClusterGroup: "eu",
				BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{ReleaseName: "db-eu"}}}}, b.Spec.Targets...)
			s.ClusterGroups = []fleet.ClusterGroup{{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "eu"},
				Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}}}}}
			render(s)
			s.Clusters[1].Labels = map[string]string{"region": "eu"}
		}, Warning, "BundleDeployment cluster-b/db", []string{`helm.releaseName: held nothing, now "db-eu"`}},
		{"options edited by hand, the ID kept", func(s *Snapshot) {
			d := &s.BundleDeployments[1]
			d.Spec.Options.Helm.Values.Data["tier"] = "platinum"
		}, Warning, "BundleDeployment cluster-b/db", []string{
			"spec.options do not hash to the deploymentID they are stored with",
			"the agent of cluster fleet-default/b reports that ID applied, so the cluster runs the options the ID was made from"}},
		{"values that no longer render for the cluster", func(s *Snapshot) {
			s.Bundles[1].Spec.Helm.Values.Data["region"] = "${ .ClusterLabels.region }"
		}, Critical, "BundleDeployment cluster-a/app", []string{"the bundle's values no longer render for cluster fleet-default/a"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := healthy()
			tc.plant(s)
			mine := valuesFindings(s)
			if tc.severity == Critical {
				// Both clusters lack the label; look at one.
				g.Expect(mine).To(HaveLen(2), "findings: %v", mine)
			} else {
				g.Expect(mine).To(HaveLen(1), "findings: %v", mine)
			}
			g.Expect(mine[0].Severity).To(Equal(tc.severity))
			g.Expect(mine[0].Object).To(Equal(tc.object))
			for _, says := range tc.says {
				g.Expect(mine[0].Message).To(ContainSubstring(says))
			}
			g.Expect(mine[0].Action).NotTo(BeEmpty())
		})
	}
}

func TestValuesRenderDifferentlyLeavesAlone(t *testing.T) {
	cases := []struct {
		name  string
		plant func(s *Snapshot)
	}{
		{"a new generation the manager has not observed yet", func(s *Snapshot) {
			s.Bundles[1].Spec.Helm.Values.Data["tier"] = "gold"
			s.Bundles[1].Generation = 2
		}},
		{"a rollout staging new options, the deployed ones held back", func(s *Snapshot) {
			s.Bundles[1].Spec.Helm.Values.Data["tier"] = "gold"
			held := s.BundleDeployments[2].Spec
			render(s)
			d := &s.BundleDeployments[2]
			d.Spec.DeploymentID, d.Spec.Options = held.DeploymentID, held.Options
			d.Status.AppliedDeploymentID = held.DeploymentID
		}},
		{"createNamespace: false stamped by a Policy", func(s *Snapshot) {
			no := false
			d := &s.BundleDeployments[0]
			d.Spec.Options.CreateNamespace, d.Spec.StagedOptions.CreateNamespace = &no, &no
			rehash(d)
		}},
		{"a cluster the bundle no longer targets", func(s *Snapshot) {
			s.Bundles[0].Spec.Targets[0].ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"env": "none"}}
		}},
		{"a deployment whose bundle is not in the snapshot", func(s *Snapshot) {
			d := &s.BundleDeployments[2]
			d.Spec.Options.Helm.Values.Data["tier"] = "gold"
			d.Spec.StagedOptions.Helm.Values.Data["tier"] = "gold"
			rehash(d)
			s.Bundles = s.Bundles[:1]
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			s := healthy()
			tc.plant(s)
			g.Expect(valuesFindings(s)).To(BeEmpty())
		})
	}
}

// rehash gives a BundleDeployment the deploymentIDs of the options it
// holds, applied.
func rehash(d *fleet.BundleDeployment) {
	id, err := target.DeploymentID("c", d.Spec.Options)
	if err != nil {
		panic(err)
	}
	d.Spec.DeploymentID, d.Spec.StagedDeploymentID, d.Status.AppliedDeploymentID = id, id, id
}
