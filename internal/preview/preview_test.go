package preview

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	git "github.com/go-git/go-git/v5"
	"github.com/go-git/go-git/v5/plumbing/object"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/bundlereader"
	"github.com/gitfleet/fleet/internal/target"
)

const fleetYAML = `helm:
  values:
    replicas: "1"
targetCustomizations:
- name: prod
  clusterSelector:
    matchLabels: {env: prod}
  helm:
    values:
      replicas: "%s"
- name: all
  clusterSelector: {}
`

// repo makes a git repository with a chart whose prod value is "2" in the
// first commit and "3" in the second.
func repo(t *testing.T) string {
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
	write := func(name, data string) {
		p := filepath.Join(dir, "app", name)
		if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	commit := func(msg string) {
		if _, err := wt.Add("app"); err != nil {
			t.Fatal(err)
		}
		if _, err := wt.Commit(msg, &git.CommitOptions{Author: &object.Signature{Name: "t", Email: "t@example.com", When: time.Now()}}); err != nil {
			t.Fatal(err)
		}
	}
	write("Chart.yaml", "apiVersion: v2\nname: app\nversion: 0.1.0\n")
	write("templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: app\ndata:\n  replicas: {{ .Values.replicas | quote }}\n")
	write("fleet.yaml", fmt.Sprintf(fleetYAML, "2"))
	commit("first")
	write("fleet.yaml", fmt.Sprintf(fleetYAML, "3"))
	commit("prod gets 3")
	return dir
}

func clusters() target.Inputs {
	c := func(name, env string) *fleet.Cluster {
		return &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: "fleet-default", Name: name, Labels: map[string]string{"env": env}}}
	}
	return target.Inputs{Clusters: []*fleet.Cluster{c("prod-1", "prod"), c("dev-1", "dev"), c("prod-2", "prod")}}
}

func read(t *testing.T, dir, rev string) []*fleet.Bundle {
	t.Helper()
	out := t.TempDir()
	if _, err := Checkout(dir, rev, out); err != nil {
		t.Fatal(err)
	}
	bs, err := bundlereader.Read(t.Context(), out, []string{"."}, bundlereader.Options{Name: "repo", Namespace: "fleet-default"})
	if err != nil {
		t.Fatal(err)
	}
	return bs
}

func TestPreviewListsExactlyTheProdClustersAndTheChangedField(t *testing.T) {
	g := NewWithT(t)
	dir := repo(t)
	r, err := Compute(t.Context(), read(t, dir, "HEAD~1"), read(t, dir, "HEAD"), clusters(), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Errors).To(BeEmpty())
	g.Expect(r.Changes()).To(BeTrue())
	names := make([]string, 0, len(r.Clusters))
	for _, c := range r.Clusters {
		names = append(names, c.Cluster)
		g.Expect(c.Bundles).To(HaveLen(1))
		g.Expect(c.Bundles[0].Bundle).To(Equal("fleet-default/repo-app"))
		g.Expect(c.Bundles[0].Change).To(Equal(Changed))
		g.Expect(c.Bundles[0].Objects).To(Equal([]ObjectChange{{Object: "configmap.v1 default/app", Change: Changed,
			Fields: []FieldChange{{Path: "/data/replicas", From: "2", To: "3"}}}}))
	}
	g.Expect(names).To(Equal([]string{"fleet-default/prod-1", "fleet-default/prod-2"}))
	var md bytes.Buffer
	g.Expect(Write(&md, r, Markdown)).To(Succeed())
	g.Expect(md.String()).To(ContainSubstring("| `fleet-default/prod-1` | `fleet-default/repo-app` | changed | `configmap.v1 default/app` changed |"))
	g.Expect(md.String()).To(ContainSubstring("`/data/replicas`: `\"2\"` → `\"3\"`"))
	g.Expect(md.String()).NotTo(ContainSubstring("dev-1"))

	same, err := Compute(t.Context(), read(t, dir, "HEAD"), read(t, dir, "HEAD"), clusters(), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(same.Changes()).To(BeFalse())
}

func TestPreviewAddsAndRemovesBundles(t *testing.T) {
	g := NewWithT(t)
	dir := repo(t)
	r, err := Compute(t.Context(), nil, read(t, dir, "HEAD"), clusters(), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Clusters).To(HaveLen(3))
	g.Expect(r.Clusters[0].Bundles[0].Change).To(Equal(Added))
	g.Expect(r.Clusters[0].Bundles[0].Objects).To(Equal([]ObjectChange{{Object: "configmap.v1 default/app", Change: Added}}))
	r, err = Compute(t.Context(), read(t, dir, "HEAD"), nil, clusters(), nil)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(r.Clusters[0].Bundles[0].Change).To(Equal(Removed))
}

func TestCheckoutOfAMissingRevision(t *testing.T) {
	g := NewWithT(t)
	dir := repo(t)
	_, err := Checkout(dir, "no-such-branch", t.TempDir())
	g.Expect(err).To(MatchError(ContainSubstring(`revision "no-such-branch" does not exist`)))
	_, err = Checkout(t.TempDir(), "HEAD", t.TempDir())
	g.Expect(err).To(MatchError(ContainSubstring("not a git repository")))
}
