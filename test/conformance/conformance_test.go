package conformance_test

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/yaml"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/test/framework"
)

func TestMain(m *testing.M) {
	code := m.Run()
	framework.RemoveBinaries()
	os.Exit(code)
}

// repo writes files (path relative to the repository root -> content) into
// a new directory and returns it.
func repo(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// applied is what one `fleet apply -o -` run gave.
type applied struct {
	Bundles []fleet.Bundle
	Stderr  string
	Err     error
}

// byName returns the printed Bundle of that name, failing the test when
// there is none.
func (a applied) byName(t *testing.T, name string) fleet.Bundle {
	t.Helper()
	for _, b := range a.Bundles {
		if b.Name == name {
			return b
		}
	}
	t.Fatalf("no Bundle %q was printed; printed: %v\nstderr: %s", name, a.names(), a.Stderr)
	return fleet.Bundle{}
}

// names are the printed Bundles' names, sorted.
func (a applied) names() []string {
	n := make([]string, 0, len(a.Bundles))
	for _, b := range a.Bundles {
		n = append(n, b.Name)
	}
	sort.Strings(n)
	return n
}

// resourceNames are a Bundle's resource names, sorted.
func resourceNames(b fleet.Bundle) []string {
	n := make([]string, 0, len(b.Spec.Resources))
	for _, r := range b.Spec.Resources {
		n = append(n, r.Name)
	}
	sort.Strings(n)
	return n
}

// apply runs the fleet binary in dir: `fleet apply args... -o -`.
func apply(t *testing.T, dir string, args ...string) applied {
	t.Helper()
	bin, err := framework.Binary("fleet")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, append(append([]string{"apply"}, args...), "-o", "-")...)
	cmd.Dir = dir
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	res := applied{Err: cmd.Run(), Stderr: stderr.String()}
	if res.Err != nil {
		res.Err = fmt.Errorf("%w: %s", res.Err, strings.TrimSpace(stderr.String()))
		return res
	}
	dec := yaml.NewYAMLOrJSONDecoder(&stdout, 4096)
	for {
		var b fleet.Bundle
		if err := dec.Decode(&b); err != nil {
			if err.Error() == "EOF" {
				break
			}
			t.Fatalf("decoding what fleet apply printed: %v", err)
		}
		if b.Name != "" {
			res.Bundles = append(res.Bundles, b)
		}
	}
	return res
}
