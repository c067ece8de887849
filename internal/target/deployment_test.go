package target

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func TestUnchangedAgreesWithBundleDeployment(t *testing.T) {
	g := NewWithT(t)
	b := &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "fleet-default", Labels: map[string]string{"team": "a", fleet.ClusterLabel: "spoof"}},
		Spec:       fleet.BundleSpec{DependsOn: []fleet.BundleRef{{Name: "db"}}},
	}
	const contentName = "s-abc"
	opts := &fleet.BundleDeploymentOptions{DefaultNamespace: "app", CorrectDrift: &fleet.CorrectDrift{Enabled: true}}
	d := &Deployment{Namespace: "cluster-ns", ID: "s-abc:1", Options: opts,
		Cluster: &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "fleet-default"}}}
	desired := func() *fleet.BundleDeployment { return BundleDeployment(b, contentName, d) }

	g.Expect(Unchanged(b, contentName, d, desired(), true)).To(BeTrue(), "what BundleDeployment builds is unchanged")
	g.Expect(desired().Labels).To(HaveKeyWithValue(fleet.ClusterLabel, "c1"), "the bundle's labels never replace the manager's")
	b.Labels[fleet.ShardRefLabel] = "shard1"
	g.Expect(desired().Labels).To(HaveKeyWithValue(fleet.ShardRefLabel, "shard1"), "the bundle's shard goes onto its deployments")
	delete(b.Labels, fleet.ShardRefLabel)

	staged := desired()
	staged.Spec.DeploymentID, staged.Spec.Options = "s-old:1", fleet.BundleDeploymentOptions{DefaultNamespace: "old"}
	g.Expect(Unchanged(b, contentName, d, staged, false)).To(BeTrue(), "a staged change the rollout holds back")
	g.Expect(Unchanged(b, contentName, d, staged, true)).To(BeFalse(), "a staged change the rollout lets through")

	for name, change := range map[string]func(bd *fleet.BundleDeployment){
		"staged id":        func(bd *fleet.BundleDeployment) { bd.Spec.StagedDeploymentID = "x" },
		"staged options":   func(bd *fleet.BundleDeployment) { bd.Spec.StagedOptions.DefaultNamespace = "x" },
		"options":          func(bd *fleet.BundleDeployment) { bd.Spec.Options.TargetNamespace = "x" },
		"paused":           func(bd *fleet.BundleDeployment) { bd.Spec.Paused = true },
		"offSchedule":      func(bd *fleet.BundleDeployment) { bd.Spec.OffSchedule = true },
		"dependsOn":        func(bd *fleet.BundleDeployment) { bd.Spec.DependsOn = nil },
		"correctDrift":     func(bd *fleet.BundleDeployment) { bd.Spec.CorrectDrift = nil },
		"a label changed":  func(bd *fleet.BundleDeployment) { bd.Labels[fleet.ContentNameLabel] = "s-other" },
		"a label missing":  func(bd *fleet.BundleDeployment) { delete(bd.Labels, "team") },
		"a label too many": func(bd *fleet.BundleDeployment) { bd.Labels["extra"] = "1" },
	} {
		bd := desired()
		change(bd)
		g.Expect(Unchanged(b, contentName, d, bd, true)).To(BeFalse(), name)
	}
}

// A cluster that a Schedule holds and none of whose windows is open gets
// offSchedule on its BundleDeployments; when a window opens, it is cleared.
func TestOffScheduleFollowsTheClusterWindow(t *testing.T) {
	g := NewWithT(t)
	b := &fleet.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "fleet-default"}}
	d := &Deployment{Namespace: "cluster-ns", ID: "s-abc:1", Options: &fleet.BundleDeploymentOptions{},
		Cluster: &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: "fleet-default"}}}
	for _, tc := range []struct {
		scheduled, active, off bool
	}{{false, false, false}, {true, false, true}, {true, true, false}} {
		d.Cluster.Status.Scheduled, d.Cluster.Status.ActiveSchedule = tc.scheduled, tc.active
		bd := BundleDeployment(b, "s-abc", d)
		g.Expect(bd.Spec.OffSchedule).To(Equal(tc.off), "scheduled %v, active %v", tc.scheduled, tc.active)
		g.Expect(Unchanged(b, "s-abc", d, bd, true)).To(BeTrue())
		bd.Spec.OffSchedule = !tc.off
		g.Expect(Unchanged(b, "s-abc", d, bd, true)).To(BeFalse(), "a window that opened or closed is a change")
	}
}

// Deployments targets clusters as the controller does: only the bundle's
// namespace and those mapped to it, groups by their selectors, Helm values
// templated per cluster, clusters that share options sharing one ID.
func TestDeployments(t *testing.T) {
	g := NewWithT(t)
	b := &fleet.Bundle{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "ws", Labels: map[string]string{"team": "a"}},
		Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "app"},
			Targets: []fleet.BundleTarget{
				{Name: "prod", ClusterGroup: "prod", BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{
					Values: &fleet.GenericMap{Data: map[string]interface{}{"name": "${ .ClusterName }"}}}}},
				{Name: "rest", ClusterSelector: &metav1.LabelSelector{}},
			},
		},
	}
	cluster := func(ns, name string, labels map[string]string) *fleet.Cluster {
		return &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: labels}}
	}
	in := Inputs{
		Clusters: []*fleet.Cluster{
			cluster("ws", "p1", map[string]string{"env": "prod"}),
			cluster("ws", "p2", map[string]string{"env": "prod"}),
			cluster("ws", "d1", map[string]string{"env": "dev"}),
			cluster("ws", "d2", nil),
			cluster("other", "o1", map[string]string{"env": "prod"}),
			cluster("mapped", "m1", nil),
		},
		Groups: []*fleet.ClusterGroup{{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "prod"},
			Spec: fleet.ClusterGroupSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}}},
		Mappings: []*fleet.BundleNamespaceMapping{{ObjectMeta: metav1.ObjectMeta{Namespace: "ws", Name: "m"},
			BundleSelector: &metav1.LabelSelector{}, NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"share": "yes"}}}},
		Namespaces: map[string]map[string]string{"ws": nil, "other": nil, "mapped": {"share": "yes"}},
	}
	ds, errs, err := Deployments(b, "s-abc", in)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(errs).To(BeEmpty())
	byName := map[string]*Deployment{}
	for _, d := range ds {
		byName[d.Cluster.Name] = d
	}
	g.Expect(byName).To(HaveLen(5), "every cluster of ws and of the mapped namespace, none of other")
	g.Expect(byName).NotTo(HaveKey("o1"))
	g.Expect(byName["p1"].Options.Helm.Values.Data).To(Equal(map[string]interface{}{"name": "p1"}))
	g.Expect(byName["p2"].Options.Helm.Values.Data).To(Equal(map[string]interface{}{"name": "p2"}))
	g.Expect(byName["p1"].ID).NotTo(Equal(byName["p2"].ID), "templated values differ, so do the IDs")
	g.Expect(byName["d1"].ID).To(Equal(byName["d2"].ID), "clusters of one untemplated target share an ID")
	g.Expect(byName["d1"].Options.Helm).To(BeNil())
	for i := 1; i < len(ds); i++ {
		g.Expect(ds[i-1].Namespace < ds[i].Namespace).To(BeTrue(), "sorted by cluster namespace")
	}
	bd := BundleDeployment(b, "s-abc", byName["m1"])
	g.Expect(bd.Namespace).To(Equal(byName["m1"].Namespace))
	g.Expect(bd.Labels).To(HaveKeyWithValue(fleet.ClusterNamespaceLabel, "mapped"))
	g.Expect(bd.Labels).To(HaveKeyWithValue("team", "a"))

	b.Spec.Targets[0].ClusterSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"bad key!": "x"}}
	_, _, err = Deployments(b, "s-abc", in)
	g.Expect(err).To(MatchError(ContainSubstring(`target "prod"`)))
}
