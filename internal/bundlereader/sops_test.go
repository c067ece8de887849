package bundlereader

import (
	"context"
	"os"
	"testing"

	. "github.com/onsi/gomega"
)

// SOPS files (made by the sops CLI: internal/sops/testdata) pass through the
// reader byte for byte: the manager neither parses nor changes them, the
// agent opens them.
func TestSOPSFilesPassThrough(t *testing.T) {
	g := NewWithT(t)
	files := map[string]string{"fleet.yaml": "defaultNamespace: app\n"}
	for name, fixture := range map[string]string{
		"secret.yaml":       "secret.sops.yaml",
		"values.json":       "values.sops.json",
		"blob.bin":          "blob.sops",
		"regex-secret.yaml": "regex.sops.yaml",
	} {
		b, err := os.ReadFile("../sops/testdata/" + fixture)
		g.Expect(err).NotTo(HaveOccurred())
		files[name] = string(b)
	}
	root := tree(t, files)
	bundles, err := Read(context.Background(), root, nil, Options{Name: "sops", Namespace: "fleet-default"})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(bundles).To(HaveLen(1))
	for name, want := range files {
		if name == "fleet.yaml" {
			continue
		}
		g.Expect(content(t, bundles[0], name)).To(Equal(want), name)
	}
}
