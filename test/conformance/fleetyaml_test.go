package conformance_test

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// fleet.yaml is read as Fleet reads it (Fleet decodes it into its FleetYAML
// type, pkg/apis/fleet.cattle.io/v1alpha1/fleetyaml.go, with
// sigs.k8s.io/yaml, which ignores keys no field takes): every field Fleet
// knows is accepted, and a key it does not know is no error. Here such a
// key, and a Fleet field this manager does not implement, is a warning on
// standard error ("warning: FILE: line N: ..."); `fleet apply` still prints
// the Bundle and exits 0. What Fleet refuses (a value of the wrong type,
// broken YAML) and what would make targeting fail later (an invalid label
// selector) fails, naming file and line.
func TestFleetYAMLLeniency(t *testing.T) {
	cm := "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n"
	cases := []struct {
		name      string
		fleetYAML string
		// check looks at the printed Bundle "conf-app", field by field.
		check func(g Gomega, spec fleet.BundleSpec)
		// warnings are the "warning:" lines expected on stderr, in order
		// (each a prefix of its line).
		warnings []string
		// err are substrings of the error; set when apply must fail.
		err []string
	}{{
		// Fleet docs, fleet.yaml reference and "Generating Diffs to Ignore
		// Modified GitRepos" ({"op": "ignore"} ignores a whole resource);
		// overrideTargets replace the GitRepo's targets and become the
		// target restrictions too (Fleet's bundlereader/read.go).
		name: "implemented Fleet fields are carried into the Bundle",
		fleetYAML: `defaultNamespace: web
namespaceLabels: {team: blue}
helm:
  releaseName: web
  values: {replicas: 2}
  disableDNS: true
  skipSchemaValidation: true
ignore:
  conditions:
  - type: Active
    status: "False"
diff:
  comparePatches:
  - apiVersion: batch/v1
    kind: Job
    namespace: web
    name: init
    operations:
    - {"op": "ignore"}
  - kind: Deployment
    name: web
    jsonPointers: [/spec/replicas]
overrideTargets:
- name: canary
  clusterSelector:
    matchLabels: {env: canary}
`,
		check: func(g Gomega, s fleet.BundleSpec) {
			g.Expect(s.DefaultNamespace).To(Equal("web"))
			g.Expect(s.NamespaceLabels).To(Equal(map[string]string{"team": "blue"}))
			g.Expect(s.Helm.ReleaseName).To(Equal("web"))
			g.Expect(s.Helm.Values.Data).To(Equal(map[string]interface{}{"replicas": float64(2)}))
			g.Expect(s.Helm.DisableDNS).To(BeTrue())
			g.Expect(s.Helm.SkipSchemaValidation).To(BeTrue())
			g.Expect(s.Ignore.Conditions).To(Equal([]map[string]string{{"type": "Active", "status": "False"}}))
			g.Expect(s.Diff.ComparePatches).To(Equal([]fleet.ComparePatch{
				{APIVersion: "batch/v1", Kind: "Job", Namespace: "web", Name: "init", Operations: []fleet.Operation{{Op: "ignore"}}},
				{Kind: "Deployment", Name: "web", JSONPointers: []string{"/spec/replicas"}},
			}))
			sel := &metav1.LabelSelector{MatchLabels: map[string]string{"env": "canary"}}
			g.Expect(s.Targets).To(Equal([]fleet.BundleTarget{{Name: "canary", ClusterSelector: sel}}))
			g.Expect(s.TargetRestrictions).To(Equal([]fleet.BundleTargetRestriction{{Name: "canary", ClusterSelector: sel}}))
		},
	}, {
		// Fleet's FleetYAML has imageScans and (BundleSpec inline) targets;
		// its BundleDeploymentOptions deleteCRDResources and
		// downstreamResources; its HelmOptions templateValues and
		// disableDependencyUpdate. imageScans is not implemented here: read,
		// checked and warned about; downstreamResources is carried as is.
		name: "Fleet fields are read; those not implemented here are warned about",
		fleetYAML: `defaultNamespace: web
helm:
  releaseName: web
  templateValues:
    replicas: "${ .ClusterValues.replicas }"
  disableDependencyUpdate: true
deleteCRDResources: true
downstreamResources:
- kind: Secret
  name: app-secret
imageScans:
- tagName: web-tag
  image: registry.example.com/web
  interval: 5m
  policy:
    semver:
      range: ">=1.0.0"
targets:
- name: dev
  clusterSelector:
    matchLabels: {env: dev}
`,
		check: func(g Gomega, s fleet.BundleSpec) {
			g.Expect(s.DefaultNamespace).To(Equal("web"))
			g.Expect(s.DeleteCRDResources).To(BeTrue())
			g.Expect(s.Helm).To(Equal(&fleet.HelmOptions{ReleaseName: "web", DisableDependencyUpdate: true,
				TemplateValues: map[string]string{"replicas": "${ .ClusterValues.replicas }"}}))
			g.Expect(s.Targets).To(HaveExactElements(HaveField("Name", "dev")))
			g.Expect(s.DownstreamResources).To(Equal([]fleet.DownstreamResource{{Kind: "Secret", Name: "app-secret"}}))
		},
		warnings: []string{
			"warning: app/fleet.yaml: line 11: imageScans is not implemented here and is ignored",
		},
	}, {
		name:      "an unknown key is a warning, the rest of the file is read",
		fleetYAML: "defaultNamespace: web\nhelm:\n  releaseName: web\n  chartt: ./chart\nsomethingNew: {a: b}\n",
		check: func(g Gomega, s fleet.BundleSpec) {
			g.Expect(s.DefaultNamespace).To(Equal("web"))
			g.Expect(s.Helm).To(Equal(&fleet.HelmOptions{ReleaseName: "web"}))
		},
		warnings: []string{
			`warning: app/fleet.yaml: line 4: unknown field "helm.chartt" is ignored`,
			`warning: app/fleet.yaml: line 5: unknown field "somethingNew" is ignored`,
		},
	}, {
		name:      "broken YAML fails with file and line",
		fleetYAML: "defaultNamespace: web\nhelm:\n  values: [\n",
		err:       []string{"app/fleet.yaml: invalid YAML: line 3"},
	}, {
		name:      "a value of the wrong type fails with file and line",
		fleetYAML: "defaultNamespace: web\nhelm:\n  timeoutSeconds: soon\n",
		err:       []string{"app/fleet.yaml: line 3: field helm.timeoutSeconds: cannot use a string as an integer"},
	}, {
		name:      "a not implemented Fleet field of the wrong type fails too, as Fleet refuses it",
		fleetYAML: "defaultNamespace: web\ndeleteCRDResources: sometimes\n",
		err:       []string{"app/fleet.yaml: line 2: field deleteCRDResources: cannot use a string as a boolean"},
	}, {
		name:      "an invalid selector in targetCustomizations fails with file and line",
		fleetYAML: "targetCustomizations:\n- name: prod\n  clusterSelector:\n    matchExpressions:\n    - {key: env, operator: Equals, values: [prod]}\n",
		err:       []string{"app/fleet.yaml: line 3: targetCustomizations[0].clusterSelector is not a valid label selector"},
	}, {
		name:      "an invalid selector in overrideTargets fails with file and line",
		fleetYAML: "overrideTargets:\n- name: a\n  clusterName: x\n- clusterGroupSelector:\n    matchLabels: {\"bad key!\": x}\n",
		err:       []string{"app/fleet.yaml: line 4: overrideTargets[1].clusterGroupSelector is not a valid label selector"},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			got := apply(t, repo(t, map[string]string{"app/fleet.yaml": tc.fleetYAML, "app/cm.yaml": cm}), "conf", "app")
			if tc.err != nil {
				g.Expect(got.Err).To(HaveOccurred())
				for _, e := range tc.err {
					g.Expect(got.Err.Error()).To(ContainSubstring(e))
				}
				g.Expect(got.Bundles).To(BeEmpty())
				return
			}
			g.Expect(got.Err).NotTo(HaveOccurred())
			tc.check(g, got.byName(t, "conf-app").Spec)
			var warnings []string
			for _, l := range strings.Split(got.Stderr, "\n") {
				if strings.HasPrefix(l, "warning:") {
					warnings = append(warnings, l)
				}
			}
			g.Expect(warnings).To(HaveLen(len(tc.warnings)), "stderr: %s", got.Stderr)
			for i, w := range tc.warnings {
				g.Expect(warnings[i]).To(HavePrefix(w))
			}
		})
	}
}
