package main

import (
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"

	"github.com/gitfleet/fleet/internal/install"
)

// Every argument the Helm chart or `fleet install controller` gives the
// manager is a flag it knows, with a value it accepts: a renamed flag fails
// here, not in a crash-looping pod.
func TestInstalledArgumentsAreFlags(t *testing.T) {
	g := NewWithT(t)
	ch, err := loader.Load("../../config/charts/fleet")
	g.Expect(err).NotTo(HaveOccurred())
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.ClientOnly, inst.DryRun, inst.ReleaseName, inst.Namespace = true, true, "fleet", "cattle-fleet-system"
	// Every value that adds an argument.
	rel, err := inst.Run(ch, map[string]any{
		"leaderElection": map[string]any{"leaseDuration": "30s"},
		"metrics":        map[string]any{"enabled": false},
		"webhook":        map[string]any{"secretName": "webhook"},
		"apiServerURL":   "https://manager.example.com:6443",
		"apiServerCA":    "ca",
		"bootstrap":      map[string]any{"enabled": false},
		"extraArgs":      []any{"--workers=8"},
		"agentUpgrade":   map[string]any{"enabled": false, "maxUnavailable": "3"},
		"clusterAPI":     map[string]any{"clusterSelector": "a=b", "namespaceSelector": "c=d", "clusterClassGroups": true},
	})
	g.Expect(err).NotTo(HaveOccurred())
	var chartArgs []string
	for _, doc := range splitYAML(rel.Manifest) {
		d := &appsv1.Deployment{}
		if yaml.Unmarshal([]byte(doc), d) == nil && d.Kind == "Deployment" {
			chartArgs = d.Spec.Template.Spec.Containers[0].Args
		}
	}
	g.Expect(chartArgs).NotTo(BeEmpty())

	objs, err := install.ControllerObjects(install.ControllerOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	var cliArgs []string
	for _, o := range objs {
		if d, ok := o.(*appsv1.Deployment); ok {
			cliArgs = d.Spec.Template.Spec.Containers[0].Args
		}
	}
	g.Expect(cliArgs).NotTo(BeEmpty())

	for _, args := range [][]string{chartArgs, cliArgs} {
		cmd := newCommand()
		g.Expect(cmd.ParseFlags(args)).To(Succeed(), "fleet-manager refuses %v", args)
		g.Expect(cmd.Flags().Args()).To(BeEmpty(), "arguments that are no flags: %v", cmd.Flags().Args())
	}
}

func splitYAML(s string) []string {
	var out []string
	for _, doc := range strings.Split(s, "\n---") {
		if strings.TrimSpace(doc) != "" {
			out = append(out, doc)
		}
	}
	return out
}
