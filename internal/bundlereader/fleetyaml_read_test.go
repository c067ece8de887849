package bundlereader

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// TestReadWarns: Read passes every fleet.yaml Warning to Options.Warn, naming
// the file relative to the root, and still builds the Bundles.
func TestReadWarns(t *testing.T) {
	g := NewWithT(t)
	root := tree(t, map[string]string{
		"a/fleet.yaml":  "defaultNamespace: a\nhelm:\n  chartt: x\n",
		"a/cm.yaml":     cm,
		"b/fleet.yml":   "imageScans: [{image: x, tagName: t}]\n",
		"b/cm.yaml":     cm,
		"c/fleet.yaml":  "defaultNamespace: c\n",
		"c/cm.yaml":     cm,
		"c/d/cm.yaml":   cm,
		"c/d/notes.txt": "no fleet.yaml here",
	})
	var warnings []Warning
	bundles, err := Read(context.Background(), root, nil, Options{Name: "w", Warn: func(w Warning) { warnings = append(warnings, w) }})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bundleNames(bundles)).To(Equal([]string{"w-a", "w-b", "w-c"}))
	g.Expect(bundles[0].Spec.DefaultNamespace).To(Equal("a"))
	g.Expect(bundles[0].Spec.Helm).To(Equal(&fleet.HelmOptions{}))
	g.Expect(warnings).To(ConsistOf(
		Warning{File: "a/fleet.yaml", Line: 3, Message: `unknown field "helm.chartt" is ignored (a typo?)`},
		Warning{File: "b/fleet.yml", Line: 1, Message: "imageScans is not implemented here and is ignored: no image is scanned and no tag is written back to the repository"},
	))
	g.Expect(warnings[0].String()).To(Equal(`a/fleet.yaml: line 3: unknown field "helm.chartt" is ignored (a typo?)`))

	// Without Warn the same directory reads the same.
	again, err := Read(context.Background(), root, nil, Options{Name: "w"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(again).To(Equal(bundles))
}

// TestReadDirWarns: ReadDir warns as Read does.
func TestReadDirWarns(t *testing.T) {
	g := NewWithT(t)
	root := tree(t, map[string]string{"app/fleet.yaml": "imageScans: []\n", "app/cm.yaml": cm})
	var warnings []string
	_, err := ReadDir(context.Background(), root, "app", Options{Name: "w", Warn: func(w Warning) { warnings = append(warnings, w.String()) }})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(warnings).To(HaveExactElements(ContainSubstring("app/fleet.yaml: line 1: imageScans is not implemented here and is ignored")))
}
