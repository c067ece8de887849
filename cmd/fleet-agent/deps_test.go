package main

import (
	"os/exec"
	"strings"
	"testing"
)

// heavy are the packages the resident agent must not link: their package
// initialization (and text/template keeping every exported method
// reachable) costs the agent tens of megabytes for as long as it runs.
// fleet-agent-deploy links them, one process per operation.
var heavy = []string{
	"helm.sh/helm/v3/pkg/action",
	"helm.sh/helm/v3/pkg/kube",
	"helm.sh/helm/v3/pkg/engine",
	"helm.sh/helm/v3/pkg/storage",
	"helm.sh/helm/v3/pkg/chartutil",
	"helm.sh/helm/v3/pkg/release",
	"sigs.k8s.io/kustomize/",
	"k8s.io/kubectl/",
}

// TestResidentAgentLinksNoHelm fails when fleet-agent links Helm's SDK,
// Kustomize or kubectl again.
func TestResidentAgentLinksNoHelm(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "github.com/gitfleet/fleet/cmd/fleet-agent").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	var found []string
	for _, dep := range strings.Fields(string(out)) {
		for _, h := range heavy {
			if dep == h || strings.HasPrefix(dep, h+"/") || (strings.HasSuffix(h, "/") && strings.HasPrefix(dep, h)) {
				found = append(found, dep)
			}
		}
	}
	if len(found) > 0 {
		t.Fatalf("fleet-agent links %s: keep Helm, Kustomize and kubectl in fleet-agent-deploy (agent/deployer) and out of the packages the resident agent imports", strings.Join(found, ", "))
	}
	// The test can fail: the deploy binary links them.
	out, err = exec.Command("go", "list", "-deps", "github.com/gitfleet/fleet/cmd/fleet-agent-deploy").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "helm.sh/helm/v3/pkg/action\n") {
		t.Fatalf("fleet-agent-deploy does not link helm.sh/helm/v3/pkg/action: is the check still looking at the right packages?")
	}
}
