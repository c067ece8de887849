package bundlereader

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var fleetYAMLSeeds = []string{
	"defaultNamespace: web\nhelm:\n  values: {replicas: 2}\n",
	"name: x\nlabels: {a: b}\ntargetCustomizations:\n- name: prod\n  clusterSelector: {matchLabels: {env: prod}}\n  helm: {values: {replicas: 5}}\n",
	"kustomize: {dir: overlays/dev}\nyaml: {overlays: [dev]}\ndiff:\n  comparePatches:\n  - {kind: Deployment, name: web, jsonPointers: [/spec/replicas]}\n",
	"dependsOn: [{name: base}, {selector: {matchLabels: {tier: db}}}]\nrolloutStrategy: {maxUnavailable: 10%, partitions: [{name: a, clusterGroup: a}]}\n",
	"helm:\n  chart: ./chart\n  valuesFiles: [values-prod.yaml]\n  releaseName: web\n",
	"helm: {values: {a: ${ .ClusterName }}}\n",
	": : :\n",
	"helm: [1, 2]\n",
	"a: &a [*a]\n",
	"imageScans: [{tagName: t, image: x, interval: 5m, policy: {semver: {range: '>=1'}}}]\ndownstreamResources: [{kind: Secret, name: s}]\n",
	"helm: {templateValues: {a: '${ .ClusterName }'}, disableDependencyUpdate: true}\ndeleteCRDResources: true\ntypo: 1\n",
	"overrideTargets: [{clusterSelector: {matchExpressions: [{key: a, operator: In, values: [b]}]}}]\ntargets: [{clusterGroup: g}]\n",
}

// FuzzParseFleetYAML: any input gives a FleetYAML or an error, never a panic,
// and errors and warnings name the file.
func FuzzParseFleetYAML(f *testing.F) {
	for _, s := range fleetYAMLSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		fy, warnings, err := ParseFleetYAML(data, "dir/fleet.yaml")
		if err != nil {
			if !strings.Contains(err.Error(), "fleet.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if fy == nil {
			t.Fatal("nil FleetYAML without an error")
		}
		for _, w := range warnings {
			if w.File != "dir/fleet.yaml" || w.Message == "" {
				t.Fatalf("warning without file or message: %+v", w)
			}
		}
	})
}

// FuzzRead: a directory whose fleet.yaml, manifest and .fleetignore are
// arbitrary reads into Bundles or a clear error, never a panic, and every
// Bundle has a valid name.
func FuzzRead(f *testing.F) {
	for _, s := range fleetYAMLSeeds {
		f.Add(s, "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n", "*.md\n", "app/sub")
	}
	f.Add("", "\x00\xff binary", "", ".")
	f.Add("name: ../../etc\n", "x", "!*", "../up")
	f.Fuzz(func(t *testing.T, fleetYAML, manifest, ignore, path string) {
		root := t.TempDir()
		dir := filepath.Join(root, "app")
		if err := os.MkdirAll(filepath.Join(dir, "sub"), 0o755); err != nil {
			t.Fatal(err)
		}
		for name, body := range map[string]string{"fleet.yaml": fleetYAML, "cm.yaml": manifest, ".fleetignore": ignore, "sub/x.yaml": manifest} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		bundles, err := Read(ctx, root, []string{path}, Options{Name: "fuzz", Namespace: "ns"})
		if err != nil {
			if errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("reading took too long: %v", err)
			}
			return
		}
		for _, b := range bundles {
			if b.Name == "" || len(b.Name) > 63 {
				t.Fatalf("invalid bundle name %q", b.Name)
			}
		}
	})
}
