package target

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// FuzzMatch: targets built from arbitrary names, labels and selector
// operators either fail to compile with an error or match without panicking,
// and a cluster excluded by doNotDeploy is never matched.
func FuzzMatch(f *testing.F) {
	f.Add("prod", "env", "prod", "In", "env", "prod", "g", false, false)
	f.Add("", "env", "", "NotIn", "env", "dev", "", true, true)
	f.Add("x", "a/b", "c", "Exists", "a/b", "", "default", false, true)
	f.Add("y", "", "", "Near", "k", "v", "", false, false)
	f.Fuzz(func(t *testing.T, name, key, value, op, clusterKey, clusterValue, group string, doNotDeploy, allMatches bool) {
		sel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: key, Operator: metav1.LabelSelectorOperator(op)}}}
		if op == "In" || op == "NotIn" {
			sel.MatchExpressions[0].Values = []string{value}
		}
		b := &fleet.Bundle{Spec: fleet.BundleSpec{Targets: []fleet.BundleTarget{
			{Name: name, ClusterSelector: sel, DoNotDeploy: doNotDeploy},
			{Name: "group", ClusterGroup: group},
			{Name: "labels", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{key: value}}},
		}}}
		if allMatches {
			b.Spec.TargetCustomizationMode = fleet.AllMatches
		}
		cb, err := Compile(b)
		if err != nil {
			return
		}
		info := &ClusterInfo{Name: "c", Namespace: "ns", Labels: map[string]string{clusterKey: clusterValue},
			Groups: []GroupInfo{{Name: group, Labels: map[string]string{clusterKey: clusterValue}}}}
		res, ok := cb.Match(info)
		if ok && res == nil {
			t.Fatal("matched without a result")
		}
		if ok && doNotDeploy && res.Target == name && name != "group" && name != "labels" {
			t.Fatalf("matched target %q that has doNotDeploy", name)
		}
	})
}
