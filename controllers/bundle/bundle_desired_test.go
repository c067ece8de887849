package bundle

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func TestUnchangedAgreesWithDesired(t *testing.T) {
	g := NewWithT(t)
	s := &scope{contentName: "s-abc", bundle: &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "fleet-default", Labels: map[string]string{"team": "a", fleet.ClusterLabel: "spoof"}},
		Spec:       fleet.BundleSpec{DependsOn: []fleet.BundleRef{{Name: "db"}}},
	}}
	opts := &fleet.BundleDeploymentOptions{DefaultNamespace: "app", CorrectDrift: &fleet.CorrectDrift{Enabled: true}}
	tg := clusterTarget{namespace: "cluster-ns", id: "s-abc:1", options: opts,
		cluster: &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "fleet-default"}}}
	desired := func() *fleet.BundleDeployment { return (&Reconciler{}).desired(s, tg) }

	g.Expect(unchanged(s, tg, desired(), true)).To(BeTrue(), "what desired builds is unchanged")
	g.Expect(desired().Labels).To(HaveKeyWithValue(fleet.ClusterLabel, "c1"), "the bundle's labels never replace the manager's")

	staged := desired()
	staged.Spec.DeploymentID, staged.Spec.Options = "s-old:1", fleet.BundleDeploymentOptions{DefaultNamespace: "old"}
	g.Expect(unchanged(s, tg, staged, false)).To(BeTrue(), "a staged change the rollout holds back")
	g.Expect(unchanged(s, tg, staged, true)).To(BeFalse(), "a staged change the rollout lets through")

	for name, change := range map[string]func(bd *fleet.BundleDeployment){
		"staged id":        func(bd *fleet.BundleDeployment) { bd.Spec.StagedDeploymentID = "x" },
		"staged options":   func(bd *fleet.BundleDeployment) { bd.Spec.StagedOptions.DefaultNamespace = "x" },
		"options":          func(bd *fleet.BundleDeployment) { bd.Spec.Options.TargetNamespace = "x" },
		"paused":           func(bd *fleet.BundleDeployment) { bd.Spec.Paused = true },
		"dependsOn":        func(bd *fleet.BundleDeployment) { bd.Spec.DependsOn = nil },
		"correctDrift":     func(bd *fleet.BundleDeployment) { bd.Spec.CorrectDrift = nil },
		"a label changed":  func(bd *fleet.BundleDeployment) { bd.Labels[fleet.ContentNameLabel] = "s-other" },
		"a label missing":  func(bd *fleet.BundleDeployment) { delete(bd.Labels, "team") },
		"a label too many": func(bd *fleet.BundleDeployment) { bd.Labels["extra"] = "1" },
	} {
		bd := desired()
		change(bd)
		g.Expect(unchanged(s, tg, bd, true)).To(BeFalse(), name)
	}
}
