package gitrepo

import (
	"testing"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// A GitRepo's labels go onto its Bundles, as Fleet's gitjob passes them to
// fleet apply (labels.Merge(gitrepo.Labels, repo-name)): a
// BundleNamespaceMapping selecting bundles by a label set on the GitRepo
// (Fleet's e2e "Bundle Namespace Mapping", team: one) then maps them. Labels
// of fleet.cattle.io stay the manager's.
func TestBundleLabelsCarryTheGitRepos(t *testing.T) {
	g := NewWithT(t)
	repo := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "simpleapp", Namespace: "project1", Labels: map[string]string{
		"team":                              "one",
		fleet.RepoLabel:                     "someone-else",
		"fleet.cattle.io/agent":             "true",
		"x.fleet.cattle.io/y":               "z",
		"app.kubernetes.io/part-of":         "shop",
		"notfleet.cattle.io.example.com/ok": "kept",
	}}}
	g.Expect(bundleLabels(repo)).To(Equal(map[string]string{
		"team":                              "one",
		"app.kubernetes.io/part-of":         "shop",
		"notfleet.cattle.io.example.com/ok": "kept",
		fleet.RepoLabel:                     "simpleapp",
	}))
	g.Expect(bundleLabels(&fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "bare"}})).
		To(Equal(map[string]string{fleet.RepoLabel: "bare"}))
}

// The GitRepo's shard is passed on to its Bundles (and from them to their
// BundleDeployments), so that one manager handles them all.
func TestBundleLabelsCarryTheShard(t *testing.T) {
	g := NewWithT(t)
	repo := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "edge", Labels: map[string]string{fleet.ShardRefLabel: "shard1", "team": "one"}}}
	g.Expect(bundleLabels(repo)).To(Equal(map[string]string{fleet.ShardRefLabel: "shard1", "team": "one", fleet.RepoLabel: "edge"}))
	repo.Labels = map[string]string{fleet.ShardRefLabel: ""}
	g.Expect(bundleLabels(repo)).To(HaveKeyWithValue(fleet.ShardRefLabel, ""), "an empty reference is still one: no default shard takes it")
}
