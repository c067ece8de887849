package main

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/gitfleet/fleet/"

// linked returns the packages the binary of the main package pkg links.
func linked(t *testing.T, pkg string) []string {
	t.Helper()
	out, err := exec.Command("go", "list", "-deps", module+pkg).CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps %s: %v\n%s", pkg, err, out)
	}
	return strings.Fields(string(out))
}

// under returns the packages of deps that are prefix or below it.
func under(deps []string, prefix string) []string {
	var found []string
	for _, d := range deps {
		if d == prefix || strings.HasPrefix(d, prefix+"/") {
			found = append(found, d)
		}
	}
	return found
}

// The product never imports test code, and the CLI links no controller:
// `fleet dev` runs the manager as the fleet-manager binary, and starts its
// control planes through internal/localcluster, which test/controlplane and
// test/framework use too.
func TestBinariesLinkNoTestCode(t *testing.T) {
	for _, cmd := range []string{"cmd/fleet", "cmd/fleet-manager", "cmd/fleet-agent", "cmd/fleet-agent-deploy"} {
		if found := under(linked(t, cmd), module+"test"); len(found) > 0 {
			t.Errorf("%s links test code: %s; move what the product needs out of test/ (e.g. into internal/localcluster)",
				cmd, strings.Join(found, ", "))
		}
	}
}

func TestCLILinksNoController(t *testing.T) {
	if found := under(linked(t, "cmd/fleet"), module+"controllers"); len(found) > 0 {
		t.Fatalf("the fleet CLI links %s: run the manager as the fleet-manager binary (as `fleet dev` does) "+
			"and share what the CLI needs through api/ or internal/", strings.Join(found, ", "))
	}
	// The test can fail: the manager links them.
	if found := under(linked(t, "cmd/fleet-manager"), module+"controllers"); len(found) == 0 {
		t.Fatalf("fleet-manager links no package under controllers/: is the check still looking at the right packages?")
	}
}
