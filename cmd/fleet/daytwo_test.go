package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/diagnose"
	"github.com/gitfleet/fleet/internal/dump"
	"github.com/gitfleet/fleet/internal/target"
)

// writeDump writes an archive holding one Cluster and one BundleDeployment;
// broken plants an Offline cluster and a drifted ConfigMap.
func writeDump(t *testing.T, broken bool) string {
	t.Helper()
	now := time.Now().UTC().Truncate(time.Second)
	// The deploymentID the manager writes: the content and the hash of the
	// (empty) options.
	id, err := target.DeploymentID("s-app", fleet.BundleDeploymentOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c := fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: "c1", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))},
		Status: fleet.ClusterStatus{Display: fleet.ClusterDisplay{State: "Ready"}, Agent: fleet.AgentStatus{LastSeen: metav1.NewTime(now.Add(-time.Minute))}}}
	bd := fleet.BundleDeployment{ObjectMeta: metav1.ObjectMeta{Namespace: "cluster-ns", Name: "repo-app", Labels: map[string]string{
		fleet.BundleNameLabel: "repo-app", fleet.BundleNamespaceLabel: "fleet-default", fleet.ClusterLabel: "c1", fleet.ClusterNamespaceLabel: "fleet-default"}},
		Spec:   fleet.BundleDeploymentSpec{DeploymentID: id, StagedDeploymentID: id},
		Status: fleet.BundleDeploymentStatus{AppliedDeploymentID: id, Ready: true, NonModified: true}}
	if broken {
		c.Status.Display.State = fleet.ClusterStateOffline
		bd.Status.NonModified = false
		bd.Status.ModifiedStatus = []fleet.ModifiedStatus{{APIVersion: "v1", Kind: "ConfigMap", Namespace: "default", Name: "app", Patch: `{"data":{"replicas":"2"}}`}}
	}
	a := &dump.Archive{Snapshot: diagnose.Snapshot{Taken: now, Clusters: []fleet.Cluster{c}, BundleDeployments: []fleet.BundleDeployment{bd},
		Unreadable: []string{diagnose.KindLease}}}
	p := filepath.Join(t.TempDir(), "dump.tgz")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := a.Write(f, "test"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestAnalyzeADump(t *testing.T) {
	g := NewWithT(t)
	out, _, err := execute("analyze", "--dump", writeDump(t, false))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("No findings: 1 clusters, 0 bundles, 1 bundledeployments"))

	out, _, err = execute("analyze", "--dump", writeDump(t, true))
	g.Expect(err).To(HaveOccurred(), "a fleet needing attention exits non-zero")
	g.Expect(out).To(MatchRegexp(`(?s)^\[critical\] agent-offline: Cluster fleet-default/c1: .*\[warning\] modified: BundleDeployment cluster-ns/repo-app`))

	bad := filepath.Join(t.TempDir(), "bad.tgz")
	g.Expect(os.WriteFile(bad, []byte("not an archive"), 0o600)).To(Succeed())
	_, _, err = execute("analyze", "--dump", bad)
	g.Expect(err).To(MatchError(ContainSubstring(bad + ": not a fleet dump archive")))
}

func TestBundleDiffOfADump(t *testing.T) {
	g := NewWithT(t)
	p := writeDump(t, true)
	out, _, err := execute("bundlediff", "--dump", p, "-n", "fleet-default", "-b", "repo-app")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("configmap.v1 default/app: modified\n  /data/replicas: the bundle has \"2\""))
	out, _, err = execute("bundlediff", "--dump", p, "--bundle-deployment", "cluster-ns/repo-app", "--fleet-yaml")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(Equal("# fleet.yaml of bundle fleet-default/repo-app\ndiff:\n  comparePatches:\n  - apiVersion: v1\n    jsonPointers:\n    - /data/replicas\n    kind: ConfigMap\n    name: app\n    namespace: default\n"))
	_, _, err = execute("bundlediff", "--dump", writeDump(t, false))
	g.Expect(err).To(HaveOccurred(), "nothing drifted exits non-zero")
}

const previewFleetYAML = `helm:
  values:
    replicas: "1"
targetCustomizations:
- name: prod
  clusterSelector:
    matchLabels: {env: prod}
  helm:
    values:
      replicas: "REPLICAS"
- name: all
  clusterSelector: {}
`

const previewClusters = `apiVersion: fleet.cattle.io/v1alpha1
kind: Cluster
metadata: {namespace: fleet-default, name: prod-1, labels: {env: prod}}
---
apiVersion: fleet.cattle.io/v1alpha1
kind: Cluster
metadata: {namespace: fleet-default, name: dev-1, labels: {env: dev}}
`

func previewRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	r, err := git.PlainInit(dir, false)
	if err != nil {
		t.Fatal(err)
	}
	wt, err := r.Worktree()
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		"app/Chart.yaml":        "apiVersion: v2\nname: app\nversion: 0.1.0\n",
		"app/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  replicas: {{ .Values.replicas | quote }}\n",
		"app/fleet.yaml":        strings.ReplaceAll(previewFleetYAML, "REPLICAS", "2"),
		"clusters.yaml":         previewClusters,
	}
	for name, data := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := wt.Add("."); err != nil {
		t.Fatal(err)
	}
	if _, err := wt.Commit("first", &git.CommitOptions{Author: &object.Signature{Name: "t", Email: "t@example.com", When: time.Now()}}); err != nil {
		t.Fatal(err)
	}
	return dir
}

func TestPreviewOfTheWorkingTree(t *testing.T) {
	g := NewWithT(t)
	dir := previewRepo(t)
	clusters := filepath.Join(dir, "clusters.yaml")
	_, _, err := execute("preview", "--repo", dir, "--name", "repo", "--clusters", clusters, "app")
	g.Expect(err).NotTo(HaveOccurred(), "nothing changed: exit 0")

	g.Expect(os.WriteFile(filepath.Join(dir, "app", "fleet.yaml"), []byte(strings.ReplaceAll(previewFleetYAML, "REPLICAS", "3")), 0o600)).To(Succeed())
	out, _, err := execute("preview", "--repo", dir, "--name", "repo", "--clusters", clusters, "-o", "markdown", "app")
	var exit exitError
	g.Expect(errors.As(err, &exit)).To(BeTrue(), "a change exits 2: %v", err)
	g.Expect(exit.code).To(Equal(2))
	g.Expect(out).To(ContainSubstring("| `fleet-default/prod-1` | `fleet-default/repo-app` | changed | `configmap.v1 default/app` changed |"))
	g.Expect(out).To(ContainSubstring("`/data/replicas`: `\"2\"` → `\"3\"`"))
	g.Expect(out).NotTo(ContainSubstring("dev-1"))

	_, _, err = execute("preview", "--repo", dir, "--from", "nope", "--clusters", clusters, "app")
	g.Expect(err).To(MatchError(ContainSubstring(`revision "nope" does not exist`)))

	g.Expect(os.WriteFile(filepath.Join(dir, "app", "fleet.yaml"), []byte("helm: [\n"), 0o600)).To(Succeed())
	_, _, err = execute("preview", "--repo", dir, "--clusters", clusters, "app")
	g.Expect(err).To(MatchError(ContainSubstring("working tree: ")))
	g.Expect(err).To(MatchError(ContainSubstring("fleet.yaml")))

	wrong := filepath.Join(t.TempDir(), "wrong.yaml")
	g.Expect(os.WriteFile(wrong, []byte("apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: y}\n"), 0o600)).To(Succeed())
	_, _, err = execute("preview", "--repo", dir, "--clusters", wrong, "app")
	g.Expect(err).To(MatchError(ContainSubstring(wrong + ": object 1 (ConfigMap x): only fleet.cattle.io Clusters")))
}

func TestDeployDryRunPrintsTheClustersObjects(t *testing.T) {
	g := NewWithT(t)
	dir := previewRepo(t)
	t.Chdir(dir)
	out, _, err := execute("deploy", "app", "--dry-run", "-l", "env=prod")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("kind: ConfigMap"))
	g.Expect(out).To(ContainSubstring(`replicas: "2"`))
	out, _, err = execute("deploy", "app", "--dry-run", "-l", "env=dev")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring(`replicas: "1"`))
	_, _, err = execute("deploy", "app", "--dry-run", "--clusters", filepath.Join(dir, "clusters.yaml"), "-N", "nope")
	g.Expect(err).To(MatchError(ContainSubstring("no Cluster nope in namespace fleet-default")))
}
