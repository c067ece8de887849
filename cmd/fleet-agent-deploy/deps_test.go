package main

import (
	"os/exec"
	"strings"
	"testing"
)

// resident are packages of the resident agent's side, or of the manager's,
// that fleet-agent-deploy has no use for: the child renders and applies one
// release, and a package it imports for one helper brings that package's
// imports and their initialization into every deploy (agent/registration
// brought agentinstall, egress and satoken; internal/bundlereader the
// manager's fleet.yaml reader, go-getter and OCI).
var resident = []string{
	"github.com/gitfleet/fleet/agent/registration",
	"github.com/gitfleet/fleet/agent/join",
	"github.com/gitfleet/fleet/agent/upstream",
	"github.com/gitfleet/fleet/agent/downstream",
	"github.com/gitfleet/fleet/agent/bundledeployment",
	"github.com/gitfleet/fleet/internal/bundlereader",
	"github.com/gitfleet/fleet/agentinstall",
}

// TestDeployChildLinksNoResidentPackage fails when fleet-agent-deploy links
// one of the resident agent's packages again.
func TestDeployChildLinksNoResidentPackage(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/gitfleet/fleet/cmd/fleet-agent-deploy").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	deps := strings.Fields(string(out))
	var found []string
	for _, dep := range deps {
		for _, r := range resident {
			if dep == r {
				found = append(found, dep)
			}
		}
	}
	if len(found) > 0 {
		t.Fatalf("fleet-agent-deploy links %s: move the helper it needs to a package both sides share (agent/kinds, agent/release, internal/content) rather than import the resident agent's or the manager's package", strings.Join(found, ", "))
	}
	// The test can fail: the resident agent links them, and the list is
	// read from the same output.
	out, err = exec.Command("go", "list", "-deps", "github.com/gitfleet/fleet/cmd/fleet-agent").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, want := range []string{"github.com/gitfleet/fleet/agent/join", "github.com/gitfleet/fleet/agent/downstream"} {
		if !strings.Contains(string(out), want+"\n") {
			t.Fatalf("fleet-agent does not link %s: is the check still looking at the right packages?", want)
		}
	}
}
