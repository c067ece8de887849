package bundlereader

import (
	"testing"

	. "github.com/onsi/gomega"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func TestParseFleetYAML(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    *FleetYAML
		wantErr []string
	}{
		{name: "empty", in: "", want: &FleetYAML{}},
		{name: "only comments", in: "# nothing\n", want: &FleetYAML{}},
		{name: "null", in: "~\n", want: &FleetYAML{}},
		{
			name: "options inline, with anchors and merge keys",
			in: "defaultNamespace: a\nhelm: &h\n  releaseName: r\n  values: {x: 1}\n" +
				"targetCustomizations:\n- name: t\n  clusterName: c\n  helm:\n    <<: *h\n    atomic: true\n",
			want: &FleetYAML{
				BundleDeploymentOptions: fleet.BundleDeploymentOptions{
					DefaultNamespace: "a",
					Helm:             &fleet.HelmOptions{ReleaseName: "r", Values: &fleet.GenericMap{Data: map[string]interface{}{"x": float64(1)}}},
				},
				TargetCustomizations: []fleet.BundleTarget{{
					Name: "t", ClusterName: "c",
					BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{
						ReleaseName: "r", Atomic: true, Values: &fleet.GenericMap{Data: map[string]interface{}{"x": float64(1)}},
					}},
				}},
			},
		},
		{
			name: "free-form values may hold any keys",
			in:   "helm:\n  values:\n    anything: {goes: [here, {deep: true}]}\n    1: numeric key\n",
			want: &FleetYAML{BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{
				Values: &fleet.GenericMap{Data: map[string]interface{}{
					"anything": map[string]interface{}{"goes": []interface{}{"here", map[string]interface{}{"deep": true}}},
					"1":        "numeric key",
				}},
			}}},
		},
		{
			name:    "unknown top-level field",
			in:      "name: x\nreleaseName: y\n",
			wantErr: []string{"fleet.yaml: line 2:", `unknown field "releaseName"`},
		},
		{
			name:    "unknown field in a target",
			in:      "targetCustomizations:\n- name: a\n  clusterGroup: g\n- name: b\n  clustrName: typo\n",
			wantErr: []string{"line 5", `unknown field "targetCustomizations[1].clustrName"`},
		},
		{
			name:    "unknown field in a label selector",
			in:      "dependsOn:\n- selector:\n    matchLabel: {a: b}\n",
			wantErr: []string{"line 3", `unknown field "dependsOn[0].selector.matchLabel"`},
		},
		{
			name:    "a key only holding an anchor is a field too",
			in:      "base: &b\n  x: 1\n",
			wantErr: []string{"line 1", `unknown field "base"`},
		},
		{
			name:    "unknown field brought in by a merge key",
			in:      "targetCustomizations:\n- name: a\n  <<: {bogus: 1}\n",
			wantErr: []string{"line 3", `unknown field "targetCustomizations[0].bogus"`},
		},
		{
			name:    "field names are case-sensitive",
			in:      "DefaultNamespace: a\n",
			wantErr: []string{`unknown field "DefaultNamespace"`},
		},
		{
			name:    "wrong type",
			in:      "name: x\nhelm:\n  timeoutSeconds: soon\n",
			wantErr: []string{"fleet.yaml: line 3:", "helm.timeoutSeconds", "an integer"},
		},
		{
			name:    "not a mapping",
			in:      "- a\n- b\n",
			wantErr: []string{"fleet.yaml: line 1: expected a mapping"},
		},
		{
			name:    "malformed",
			in:      "name: x\nlabels:\n  a: b\n c: d\n",
			wantErr: []string{"fleet.yaml: invalid YAML: line 3"},
		},
		{
			name:    "duplicate key",
			in:      "name: x\nname: y\n",
			wantErr: []string{"fleet.yaml: line 2:", `key "name" is given twice (first at line 1)`},
		},
		{
			name:    "duplicate key in free-form values",
			in:      "helm:\n  values:\n    a: 1\n    a: 2\n",
			wantErr: []string{"fleet.yaml: line 4:", `key "a" is given twice`},
		},
		{
			name:    "release name too long",
			in:      "helm:\n  releaseName: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n",
			wantErr: []string{"helm.releaseName", "longer than 53"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, err := ParseFleetYAML([]byte(tt.in), "fleet.yaml")
			if tt.wantErr != nil {
				g.Expect(err).To(HaveOccurred())
				for _, w := range tt.wantErr {
					g.Expect(err.Error()).To(ContainSubstring(w))
				}
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
		})
	}
}
