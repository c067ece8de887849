package bundle

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/target"
)

func TestNeedsWrites(t *testing.T) {
	g := NewWithT(t)
	targets := []target.Deployment{{Namespace: "a", ID: "new"}, {Namespace: "b", ID: "new"}}
	bd := func(ns, staged, deployed string) *fleet.BundleDeployment {
		return &fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns},
			Spec: fleet.BundleDeploymentSpec{StagedDeploymentID: staged, DeploymentID: deployed}}
	}
	plan := func(deploy, create []bool) *Plan { return &Plan{Deploy: deploy, Create: create} }
	all := []bool{true, true}

	settled := map[string]*fleet.BundleDeployment{"a": bd("a", "new", "new"), "b": bd("b", "new", "new")}
	g.Expect(needsWrites(targets, settled, plan(all, all))).To(BeFalse(), "everything is as desired")

	g.Expect(needsWrites(targets, map[string]*fleet.BundleDeployment{"a": settled["a"]}, plan(all, all))).
		To(BeTrue(), "a missing deployment the plan creates")
	g.Expect(needsWrites(targets, map[string]*fleet.BundleDeployment{"a": settled["a"]}, plan(all, []bool{true, false}))).
		To(BeFalse(), "a missing deployment held back by maxNew")

	staged := map[string]*fleet.BundleDeployment{"a": settled["a"], "b": bd("b", "new", "old")}
	g.Expect(needsWrites(targets, staged, plan([]bool{true, false}, all))).
		To(BeFalse(), "a staged change the rollout still holds back")
	g.Expect(needsWrites(targets, staged, plan(all, all))).
		To(BeTrue(), "a staged change the rollout now lets through")

	g.Expect(needsWrites(targets, map[string]*fleet.BundleDeployment{"a": settled["a"], "b": bd("b", "old", "old")}, plan([]bool{true, false}, all))).
		To(BeTrue(), "a change not staged yet")

	extra := map[string]*fleet.BundleDeployment{"a": settled["a"], "b": settled["b"], "c": bd("c", "new", "new")}
	g.Expect(needsWrites(targets, extra, plan(all, all))).To(BeTrue(), "a deployment for a cluster no longer targeted")
}
