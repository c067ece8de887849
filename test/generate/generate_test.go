// Package generate fails when the generated files (deepcopy code, CRDs, the
// manager's ClusterRole, the copy of Cluster API's CRD) differ from what `make generate` would write now.
package generate

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

const root = "../.."

func run(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = root
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func compareDirs(t *testing.T, want, got, pattern string) {
	t.Helper()
	gen, _ := filepath.Glob(filepath.Join(got, pattern))
	have, _ := filepath.Glob(filepath.Join(want, pattern))
	if len(gen) != len(have) {
		t.Errorf("%s holds %d generated files, the generator writes %d: run `make generate`", want, len(have), len(gen))
	}
	for _, g := range gen {
		w := filepath.Join(want, filepath.Base(g))
		a, _ := os.ReadFile(g)
		b, err := os.ReadFile(w)
		if err != nil || !bytes.Equal(a, b) {
			t.Errorf("%s is stale: run `make generate`", w)
		}
	}
}

func TestGeneratedFilesAreCurrent(t *testing.T) {
	tmp := t.TempDir()
	gen := filepath.Join(tmp, "controller-gen")
	run(t, "go", "build", "-o", gen, "sigs.k8s.io/controller-tools/cmd/controller-gen")

	objDir := filepath.Join(tmp, "object")
	run(t, gen, "object", "paths=./api/...", "output:object:dir="+objDir)
	compareDirs(t, filepath.Join(root, "api", "v1alpha1"), objDir, "zz_generated.*.go")

	crdDir := filepath.Join(tmp, "crd")
	run(t, gen, "crd", "paths=./api/...", "output:crd:dir="+crdDir)
	compareDirs(t, filepath.Join(root, "config", "crd", "bases"), crdDir, "*.yaml")

	rbacDir := filepath.Join(tmp, "rbac")
	run(t, gen, "rbac:roleName=fleet-manager", "paths=./controllers/...", "output:rbac:dir="+rbacDir)
	compareDirs(t, filepath.Join(root, "config", "rbac"), rbacDir, "role.yaml")

	capi := moduleDir(t, "sigs.k8s.io/cluster-api@"+capiVersion(t))
	compareDirs(t, filepath.Join(root, "internal", "localcluster", "capi"),
		filepath.Join(capi, "core", "config", "crd", "bases"), "cluster.x-k8s.io_clusters.yaml")
}

// capiVersion reads CAPI_VERSION from the Makefile, the one place it is pinned.
func capiVersion(t *testing.T) string {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(raw), "\n") {
		if v, ok := strings.CutPrefix(line, "CAPI_VERSION := "); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("no CAPI_VERSION in the Makefile")
	return ""
}

func moduleDir(t *testing.T, mod string) string {
	t.Helper()
	var info struct{ Dir string }
	if err := json.Unmarshal([]byte(run(t, "go", "mod", "download", "-json", mod)), &info); err != nil || info.Dir == "" {
		t.Fatalf("go mod download %s: %v", mod, err)
	}
	return info.Dir
}
