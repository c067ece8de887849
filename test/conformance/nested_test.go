package conformance_test

import (
	"testing"

	. "github.com/onsi/gomega"
)

const deployment = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: x\n"

// Fleet's own `fleet apply` test data, as its integration tests read it
// (integrationtests/cli/apply, assets nested_mixed_two_levels and
// helm-values-ignore), with small manifests in place of theirs.
func TestFleetTestData(t *testing.T) {
	runDiscovery(t, []discoveryCase{{
		// "multiple fleet.yaml mixed with simple resources in a nested
		// folder": three bundles; the root one holds all six files, those of
		// the two fleet.yaml directories and their fleet.yaml included. (An
		// underscore in a path gives a name with a hash, as in Fleet.)
		name: "nested_mixed_two_levels",
		files: map[string]string{
			"nested_mixed_two_levels/nested/deploymentA/fleet.yaml":      "namespace: deploymenta\n",
			"nested_mixed_two_levels/nested/deploymentA/deployment.yaml": deployment,
			"nested_mixed_two_levels/nested/deploymentB/svc.yaml":        configMap,
			"nested_mixed_two_levels/nested/deploymentC/fleet.yaml":      "namespace: deploymentc\n",
			"nested_mixed_two_levels/nested/deploymentC/cm.yaml":         configMap,
			"nested_mixed_two_levels/nested/deploymentD/deployment.yaml": deployment,
		},
		args: []string{"repo", "nested_mixed_two_levels"},
		want: map[string][]string{
			"repo-nested-mixed-two-levels-56693a3d": {
				"nested/deploymentA/deployment.yaml", "nested/deploymentA/fleet.yaml", "nested/deploymentB/svc.yaml",
				"nested/deploymentC/cm.yaml", "nested/deploymentC/fleet.yaml", "nested/deploymentD/deployment.yaml",
			},
			"repo-nested-mixed-two-levels-nested-deploymenta-6495d": {"deployment.yaml"},
			"repo-nested-mixed-two-levels-nested-deploymentc-a177c": {"cm.yaml"},
		},
		check: func(g Gomega, a applied) {
			g.Expect(a.bundle("repo-nested-mixed-two-levels-56693a3d").Spec.TargetNamespace).To(BeEmpty())
			g.Expect(a.bundle("repo-nested-mixed-two-levels-nested-deploymenta-6495d").Spec.TargetNamespace).To(Equal("deploymenta"))
			g.Expect(a.bundle("repo-nested-mixed-two-levels-nested-deploymentc-a177c").Spec.TargetNamespace).To(Equal("deploymentc"))
		},
	}, {
		// helm-values-ignore: the root bundle's chart is the config-chart
		// directory, which is a bundle of its own, and its values file is
		// config-chart/values.yaml. Fleet leaves a values file out by its
		// path and by its base name at the top, in both bundles; it reads
		// helm.valuesFiles only for a chart, so config-chart's own
		// fleet.yaml, which names config-chart/values.yaml from inside
		// config-chart (a file that does not exist) but no chart, is no
		// error there.
		name: "helm-values-ignore",
		files: map[string]string{
			"helm-values-ignore/fleet.yaml": "helm:\n  chart: config-chart\n  version: '0.1.0'\n" +
				"  valuesFiles:\n    - config-chart/values.yaml\n",
			"helm-values-ignore/config-chart/fleet.yaml":               "helm:\n  valuesFiles:\n    - config-chart/values.yaml\n",
			"helm-values-ignore/config-chart/values.yaml":              "name: global.fleet.clusterLabels.management.cattle.io/cluster-display-name\n",
			"helm-values-ignore/config-chart/templates/configmap.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app-config\ndata:\n  test: \"value\"\n  name: {{ .Values.name }}\n",
		},
		args: []string{"repo", "helm-values-ignore"},
		want: map[string][]string{
			"repo-helm-values-ignore":              {"config-chart/fleet.yaml", "config-chart/templates/configmap.yaml"},
			"repo-helm-values-ignore-config-chart": {"templates/configmap.yaml"},
		},
		check: func(g Gomega, a applied) {
			root := a.bundle("repo-helm-values-ignore").Spec.Helm
			g.Expect(root.Chart).To(Equal("config-chart"))
			g.Expect(root.ValuesFiles).To(Equal([]string{"config-chart/values.yaml"}))
			g.Expect(root.Values.Data).To(Equal(map[string]interface{}{
				"name": "global.fleet.clusterLabels.management.cattle.io/cluster-display-name",
			}))
			sub := a.bundle("repo-helm-values-ignore-config-chart").Spec.Helm
			g.Expect(sub.Chart).To(BeEmpty())
			g.Expect(sub.ValuesFiles).To(Equal([]string{"config-chart/values.yaml"}))
			g.Expect(sub.Values).To(BeNil(), "not read without a chart")
		},
	}, {
		// Fleet's loaddirectory test "no .fleetignore": chart/myvalues.yaml
		// is a values file, left out; fleet.yaml is left out.
		name: "a values file in a sub-directory is left out by its path",
		files: map[string]string{
			"app/fleet.yaml":          "helm:\n  chart: chart\n  valuesFiles: [chart/myvalues.yaml]\n",
			"app/chart/Chart.yaml":    "apiVersion: v2\nname: c\nversion: 0.1.0\n",
			"app/chart/myvalues.yaml": "a: b\n",
			"app/something.yaml":      configMap,
		},
		args: []string{"repo", "app"},
		want: map[string][]string{"repo-app": {"chart/Chart.yaml", "something.yaml"}},
		check: func(g Gomega, a applied) {
			g.Expect(a.bundle("repo-app").Spec.Helm.Values.Data).To(Equal(map[string]interface{}{"a": "b"}))
		},
	}})
}
