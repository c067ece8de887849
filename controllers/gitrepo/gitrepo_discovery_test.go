package gitrepo_test

import (
	"testing"

	. "github.com/onsi/gomega"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// TestDrivenScanAndGlobPaths: spec.bundles names the bundles (Fleet's driven
// scan), a GitRepo without targets gives them the default target and
// restriction, and spec.paths globs with a leading "/" select directories.
func TestDrivenScanAndGlobPaths(t *testing.T) {
	g := NewWithT(t)
	ns := newNamespace(t)
	repo, first := newGitRepo(g, ns+"-driven", merge(appFiles("one", "1"), appFiles("two", "2"), map[string]string{
		"kust/base/cm.yaml": "kind: ConfigMap\n",
		"kust/dev.yaml":     "namespace: dev\n",
		"kust/prod.yaml":    "namespace: prod\n",
	}))
	createGitRepo(g, ns, "demo", fleet.GitRepoSpec{Repo: repo.Dir, Bundles: []fleet.BundlePath{
		{Base: "apps/one"}, {Base: "kust", Options: "dev.yaml"}, {Base: "kust", Options: "prod.yaml"},
	}})

	t.Log("one Bundle per spec.bundles entry, named after base and options file")
	g.Eventually(bundleCommits(g, ns, "demo"), eventually, poll).Should(Equal(map[string]string{
		"demo-apps-one": first, "demo-kust-dev": first, "demo-kust-prod": first,
	}))
	dev := bundles(g, ns, "demo")["demo-kust-dev"]
	g.Expect(dev.Spec.TargetNamespace).To(Equal("dev"))
	g.Expect(dev.Spec.Targets).To(Equal([]fleet.BundleTarget{{Name: "default", ClusterGroup: "default"}}))
	g.Expect(dev.Spec.TargetRestrictions).To(Equal([]fleet.BundleTargetRestriction{{Name: "default", ClusterGroup: "default"}}))

	t.Log("back to searching paths: a glob with a leading slash")
	updateSpec(g, ns, "demo", func(s *fleet.GitRepoSpec) { s.Bundles = nil; s.Paths = []string{"/apps/*"} })
	g.Eventually(bundleCommits(g, ns, "demo"), eventually, poll).Should(Equal(map[string]string{
		"demo-apps-one": first, "demo-apps-two": first,
	}))
}
