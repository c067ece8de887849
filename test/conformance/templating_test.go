package conformance_test

import (
	"testing"

	. "github.com/onsi/gomega"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Values templates are rendered per cluster by the manager, never by
// `fleet apply`: the Bundle carries helm.values, helm.templateValues and
// global.fleet.clusterLabels.<label> values exactly as fleet.yaml wrote them
// (Fleet's fleet.yaml reference: "templateValues"; its manager renders them
// in target.preprocessHelmValues, per cluster).
func TestValuesTemplatesKeptInBundle(t *testing.T) {
	manifest := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: x\n"
	cases := []struct {
		name      string
		fleetYAML string
		want      fleet.HelmOptions
	}{{
		name: "values and templateValues as written",
		fleetYAML: "helm:\n  values:\n    cluster: ${ .ClusterName }\n    region: global.fleet.clusterLabels.region\n" +
			"  templateValues:\n    replicas: \"${ .ClusterValues.replicas | default 1 }\"\n",
		want: fleet.HelmOptions{
			Values:         &fleet.GenericMap{Data: map[string]interface{}{"cluster": "${ .ClusterName }", "region": "global.fleet.clusterLabels.region"}},
			TemplateValues: map[string]string{"replicas": "${ .ClusterValues.replicas | default 1 }"},
		},
	}, {
		name:      "disablePreProcess kept",
		fleetYAML: "helm:\n  disablePreProcess: true\n  values:\n    script: echo ${HOME}\n",
		want: fleet.HelmOptions{
			DisablePreProcess: true,
			Values:            &fleet.GenericMap{Data: map[string]interface{}{"script": "echo ${HOME}"}},
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := apply(t, repo(t, map[string]string{"app/fleet.yaml": tc.fleetYAML, "app/cm.yaml": manifest}), "repo", "app")
			g.Expect(got.Err).NotTo(HaveOccurred())
			b := got.byName(t, "repo-app")
			g.Expect(b.Spec.Helm).NotTo(BeNil())
			g.Expect(b.Spec.Helm.Values).To(Equal(tc.want.Values))
			g.Expect(b.Spec.Helm.TemplateValues).To(Equal(tc.want.TemplateValues))
			g.Expect(b.Spec.Helm.DisablePreProcess).To(Equal(tc.want.DisablePreProcess))
		})
	}
}
