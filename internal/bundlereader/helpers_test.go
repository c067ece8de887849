package bundlereader

import (
	"os"
	"path/filepath"
	"sort"
	"testing"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// tree writes files (slash-separated path -> content) below a new temporary
// directory and returns it.
func tree(t *testing.T, files map[string]string) string {
	t.Helper()
	root := t.TempDir()
	write(t, root, files)
	return root
}

func write(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// resourceNames lists the names of a bundle's resources, in their order.
func resourceNames(b *fleet.Bundle) []string {
	out := make([]string, 0, len(b.Spec.Resources))
	for _, r := range b.Spec.Resources {
		out = append(out, r.Name)
	}
	return out
}

// bundleNames lists bundle names, in their order.
func bundleNames(bs []*fleet.Bundle) []string {
	out := make([]string, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.Name)
	}
	return out
}

// content returns the decoded content of a bundle's resource, or fails.
func content(t *testing.T, b *fleet.Bundle, name string) string {
	t.Helper()
	for _, r := range b.Spec.Resources {
		if r.Name == name {
			data, err := DecodeResource(r)
			if err != nil {
				t.Fatal(err)
			}
			return string(data)
		}
	}
	t.Fatalf("bundle %s has no resource %s; it has %v", b.Name, name, resourceNames(b))
	return ""
}

func sorted(s []string) []string {
	out := append([]string(nil), s...)
	sort.Strings(out)
	return out
}
