package bundlereader

import (
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

func TestParseFleetYAML(t *testing.T) {
	tests := []struct {
		name    string
		in      string
		want    *FleetYAML
		wantErr []string
		// warn are substrings of the Warnings' strings, one per Warning.
		warn []string
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
			name: "unknown top-level field: a warning, the rest is read",
			in:   "name: x\nreleaseName: y\n",
			want: &FleetYAML{Name: "x"},
			warn: []string{`fleet.yaml: line 2: unknown field "releaseName" is ignored`},
		},
		{
			name: "unknown field in a target",
			in:   "targetCustomizations:\n- name: a\n  clusterGroup: g\n- name: b\n  clustrName: typo\n",
			want: &FleetYAML{TargetCustomizations: []fleet.BundleTarget{{Name: "a", ClusterGroup: "g"}, {Name: "b"}}},
			warn: []string{`line 5: unknown field "targetCustomizations[1].clustrName"`},
		},
		{
			name: "unknown field in a label selector",
			in:   "dependsOn:\n- selector:\n    matchLabel: {a: b}\n",
			want: &FleetYAML{DependsOn: []fleet.BundleRef{{Selector: &metav1.LabelSelector{}}}},
			warn: []string{`line 3: unknown field "dependsOn[0].selector.matchLabel"`},
		},
		{
			name: "a key only holding an anchor is a field too",
			in:   "base: &b\n  x: v\nnamespaceLabels: *b\n",
			want: &FleetYAML{BundleDeploymentOptions: fleet.BundleDeploymentOptions{NamespaceLabels: map[string]string{"x": "v"}}},
			warn: []string{`line 1: unknown field "base"`},
		},
		{
			name: "unknown field brought in by a merge key, warned once however often the anchor is used",
			in:   "targetCustomizations:\n- name: a\n  <<: &m {bogus: 1}\n- name: b\n  <<: *m\n",
			want: &FleetYAML{TargetCustomizations: []fleet.BundleTarget{{Name: "a"}, {Name: "b"}}},
			warn: []string{`line 3: unknown field "targetCustomizations[0].bogus"`, `line 3: unknown field "targetCustomizations[1].bogus"`},
		},
		{
			// Fleet decodes fleet.yaml with Go's encoding/json, which matches
			// field names regardless of case.
			name: "field names match regardless of case, as in Fleet",
			in:   "DefaultNamespace: a\nHelm: {ReleaseName: r}\n",
			want: &FleetYAML{BundleDeploymentOptions: fleet.BundleDeploymentOptions{DefaultNamespace: "a", Helm: &fleet.HelmOptions{ReleaseName: "r"}}},
		},
		{
			// Fleet's FleetYAML: BundleSpec inline (targets, targetRestrictions,
			// resources, contentsId, valuesHash), imageScans, overrideTargets;
			// BundleDeploymentOptions: deleteCRDResources, downstreamResources (read);
			// HelmOptions: templateValues, disableDependencyUpdate.
			name: "every Fleet field is read; those not implemented are warned about",
			in: `targets:
- name: t
  clusterSelector: {matchLabels: {env: prod}}
overrideTargets:
- clusterGroup: g
imageScans:
- name: scan
  tagName: app-tag
  image: registry.example.com/app
  interval: 5m
  secretRef: {name: creds}
  suspend: false
  policy: {semver: {range: ">=1.0.0"}}
targetRestrictions: [{name: r, clusterGroup: g}]
resources: [{name: x.yaml, content: "a: b"}]
contentsId: abc
valuesHash: def
deleteCRDResources: true
downstreamResources: [{kind: Secret, name: s}]
helm:
  templateValues: {replicas: "${ .ClusterValues.replicas }"}
  disableDependencyUpdate: true
targetCustomizations:
- name: c
  clusterName: c1
  deleteCRDResources: false
  helm: {disableDependencyUpdate: false}
ignore:
  conditions: [{type: Active, status: "False"}]
diff:
  comparePatches:
  - {apiVersion: batch/v1, kind: Job, namespace: ns, name: init, operations: [{op: ignore}]}
`,
			want: &FleetYAML{
				BundleDeploymentOptions: fleet.BundleDeploymentOptions{
					DeleteCRDResources:  true,
					DownstreamResources: []fleet.DownstreamResource{{Kind: "Secret", Name: "s"}},
					Helm: &fleet.HelmOptions{TemplateValues: map[string]string{"replicas": "${ .ClusterValues.replicas }"},
						DisableDependencyUpdate: true},
					Ignore: fleet.IgnoreOptions{Conditions: []map[string]string{{"type": "Active", "status": "False"}}},
					Diff: &fleet.DiffOptions{ComparePatches: []fleet.ComparePatch{{
						APIVersion: "batch/v1", Kind: "Job", Namespace: "ns", Name: "init", Operations: []fleet.Operation{{Op: "ignore"}},
					}}},
				},
				Targets:              []fleet.BundleTarget{{Name: "t", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}}},
				OverrideTargets:      []fleet.GitTarget{{ClusterGroup: "g"}},
				TargetCustomizations: []fleet.BundleTarget{{Name: "c", ClusterName: "c1", BundleDeploymentOptions: fleet.BundleDeploymentOptions{Helm: &fleet.HelmOptions{}}}},
			},
			warn: []string{
				"line 6: imageScans is not implemented here and is ignored",
				"line 14: targetRestrictions is not implemented",
				"line 15: resources is not implemented",
				"line 16: contentsId is not implemented",
				"line 17: valuesHash is not implemented",
			},
		},
		{
			name: "unknown keys inside an ignored Fleet field are warned about too",
			in:   "imageScans:\n- image: x\n  tagName: t\n  polcy: {}\n",
			want: &FleetYAML{},
			warn: []string{"line 1: imageScans is not implemented", `line 4: unknown field "imageScans[0].polcy"`},
		},
		{
			name:    "a Fleet field of the wrong type fails, as in Fleet",
			in:      "name: x\ndeleteCRDResources: maybe\n",
			wantErr: []string{"fleet.yaml: line 2:", "deleteCRDResources"},
		},
		{
			name:    "a wrong type deep in an ignored Fleet field",
			in:      "downstreamResources:\n- kind: Secret\n  name: [a]\n",
			wantErr: []string{"fleet.yaml: line 3:", "field downstreamResources.name: cannot use a array as a string"},
		},
		{
			name:    "helm.templateValues must map to strings",
			in:      "helm:\n  templateValues:\n    a: {b: c}\n",
			wantErr: []string{"fleet.yaml: line 2:", "field helm.templateValues: cannot use a object as a string"},
		},
		{
			name:    "an image scan interval that is no duration",
			in:      "imageScans:\n- image: x\n  interval: soon\n",
			wantErr: []string{"fleet.yaml: line 2:", "imageScans", "invalid duration"},
		},
		{
			name:    "targets of the wrong type",
			in:      "targets: {clusterName: a}\n",
			wantErr: []string{"fleet.yaml: line 1:", "field targets: cannot use a object as a list"},
		},
		{
			name:    "an invalid selector operator in a target customization",
			in:      "targetCustomizations:\n- name: a\n  clusterName: x\n- name: b\n  clusterSelector:\n    matchExpressions: [{key: env, operator: Bogus, values: [a]}]\n",
			wantErr: []string{"fleet.yaml: line 5:", "targetCustomizations[1].clusterSelector is not a valid label selector", `"Bogus" is not a valid label selector operator`},
		},
		{
			name:    "an invalid label value in overrideTargets",
			in:      "overrideTargets:\n- clusterGroupSelector:\n    matchLabels: {env: \"not valid!\"}\n",
			wantErr: []string{"fleet.yaml: line 2:", "overrideTargets[0].clusterGroupSelector is not a valid label selector"},
		},
		{
			name:    "an invalid selector in fleet.yaml targets",
			in:      "targets:\n- clusterSelector: {matchExpressions: [{key: a, operator: Exists, values: [x]}]}\n",
			wantErr: []string{"fleet.yaml: line 2:", "targets[0].clusterSelector is not a valid label selector"},
		},
		{
			name:    "an invalid selector in dependsOn",
			in:      "dependsOn:\n- name: a\n- selector: {matchExpressions: [{key: '', operator: In, values: [x]}]}\n",
			wantErr: []string{"fleet.yaml: line 3:", "dependsOn[1].selector is not a valid label selector"},
		},
		{
			name:    "an invalid selector in a rollout partition",
			in:      "rolloutStrategy:\n  partitions:\n  - name: p\n    clusterSelector: {matchLabels: {'a b': c}}\n",
			wantErr: []string{"fleet.yaml: line 4:", "rolloutStrategy.partitions[0].clusterSelector is not a valid label selector"},
		},
		{
			name:    "a dependsOn entry naming nothing",
			in:      "dependsOn:\n- name: a\n- acceptedStates: [Ready]\n",
			wantErr: []string{"fleet.yaml: line 3:", "dependsOn[1] must set name or selector"},
		},
		{
			name:    "a dependsOn accepted state that is none",
			in:      "dependsOn:\n- name: a\n  acceptedStates: [Ready, Done]\n",
			wantErr: []string{"fleet.yaml: line 3:", `dependsOn[0].acceptedStates[1] "Done" is not a bundle state`},
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
			wantErr: []string{"fleet.yaml: line 2:", "helm.releaseName", "longer than 53"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := NewWithT(t)
			got, warnings, err := ParseFleetYAML([]byte(tt.in), "fleet.yaml")
			if tt.wantErr != nil {
				g.Expect(err).To(HaveOccurred())
				for _, w := range tt.wantErr {
					g.Expect(err.Error()).To(ContainSubstring(w))
				}
				g.Expect(warnings).To(BeNil())
				return
			}
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(got).To(Equal(tt.want))
			g.Expect(warnings).To(HaveLen(len(tt.warn)), "%v", warnings)
			for i, w := range tt.warn {
				g.Expect(warnings[i].String()).To(ContainSubstring(w))
			}
		})
	}
}

// TestParseFleetYAMLCycles: anchors that contain themselves, through merge
// keys or lists, end; the values are refused or read, never walked forever.
func TestParseFleetYAMLCycles(t *testing.T) {
	for _, in := range []string{
		"helm: &h\n  <<: *h\n",
		"helm: &h\n  atomic: true\n  <<: [*h]\n",
		"a: &a\n  <<: *a\n",
		"targetCustomizations: &a [*a]\n",
		"imageScans: &a [*a]\n",
		"imageScans: &a\n- <<: *a\n",
		"downstreamResources: &d [{kind: *d}]\n",
		"base: &x {image: y, tagName: t}\nimageScans: [*x]\n",
	} {
		t.Run(in, func(t *testing.T) {
			done := make(chan struct{})
			go func() {
				defer close(done)
				_, _, _ = ParseFleetYAML([]byte(in), "fleet.yaml")
			}()
			select {
			case <-done:
			case <-time.After(10 * time.Second):
				t.Fatal("parsing did not end")
			}
		})
	}
}

// TestParseFleetYAMLAliasIntoIgnoredField: an ignored Fleet field may be an
// alias of a value defined elsewhere; its shape is checked through it.
func TestParseFleetYAMLAliasIntoIgnoredField(t *testing.T) {
	g := NewWithT(t)
	_, w, err := ParseFleetYAML([]byte("x: &x {image: y, tagName: t}\nimageScans: [*x]\n"), "fleet.yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(w).To(HaveLen(2))
	_, _, err = ParseFleetYAML([]byte("x: &x {image: [y]}\nimageScans: [*x]\n"), "fleet.yaml")
	g.Expect(err).To(MatchError(ContainSubstring("line 1: field imageScans.image: cannot use a array as a string")))
}

// BenchmarkParseFleetYAML parses a one-line fleet.yaml, as each directory
// of a monorepo has: what reading a GitRepo's bundles costs per file before
// any manifest is read (docs/scale.md, the monorepo bench).
func BenchmarkParseFleetYAML(b *testing.B) {
	data := []byte("defaultNamespace: monorepo\n")
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := ParseFleetYAML(data, "apps/app000/fleet.yaml"); err != nil {
			b.Fatal(err)
		}
	}
}
