package main

import (
	"testing"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
)

// renderDeployments renders the chart with values and returns its
// Deployments by name.
func renderDeployments(g Gomega, values map[string]any) (map[string]*appsv1.Deployment, error) {
	ch, err := loader.Load("../../config/charts/fleet")
	g.Expect(err).NotTo(HaveOccurred())
	inst := action.NewInstall(&action.Configuration{Log: func(string, ...any) {}})
	inst.ClientOnly, inst.DryRun, inst.ReleaseName, inst.Namespace = true, true, "fleet", "cattle-fleet-system"
	rel, err := inst.Run(ch, values)
	if err != nil {
		return nil, err
	}
	out := map[string]*appsv1.Deployment{}
	for _, doc := range splitYAML(rel.Manifest) {
		d := &appsv1.Deployment{}
		if yaml.Unmarshal([]byte(doc), d) == nil && d.Kind == "Deployment" {
			out[d.Name] = d
		}
	}
	return out, nil
}

// The chart deploys one manager per shard of Fleet's `shards` value (a
// repeated ID once), each with its --shard-id, its pod labels and its node
// selector; no Deployment's selector takes another's pods; only the
// default shard's serves the webhook.
func TestChartDeploysOneManagerPerShard(t *testing.T) {
	g := NewWithT(t)
	deps, err := renderDeployments(g, map[string]any{
		"shards": []any{
			map[string]any{"id": "shard1", "nodeSelector": map[string]any{"zone": "a"}},
			map[string]any{"id": "shard2"},
			map[string]any{"id": "shard1"},
		},
		"nodeSelector": map[string]any{"kubernetes.io/os": "linux"},
	})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(deps).To(HaveLen(3))
	for name, want := range map[string]string{"fleet-manager": "", "fleet-manager-shard-shard1": "shard1", "fleet-manager-shard-shard2": "shard2"} {
		d := deps[name]
		g.Expect(d).NotTo(BeNil(), "no Deployment %s", name)
		args := d.Spec.Template.Spec.Containers[0].Args
		cmd := newCommand()
		g.Expect(cmd.ParseFlags(args)).To(Succeed(), "fleet-manager refuses %v", args)
		g.Expect(cmd.Flags().Args()).To(BeEmpty())
		g.Expect(cmd.Flags().GetString("shard-id")).To(Equal(want), name)
		webhook, _ := cmd.Flags().GetString("webhook-bind-address")
		if want == "" {
			g.Expect(webhook).NotTo(BeEmpty(), "%s: webhook %q", name, webhook)
		} else {
			g.Expect(webhook).To(BeEmpty(), "%s: webhook %q", name, webhook)
		}
		podLabels := d.Spec.Template.Labels
		g.Expect(podLabels).To(HaveKeyWithValue(fleet.ShardIDLabel, want))
		if want == "" {
			g.Expect(podLabels).To(HaveKeyWithValue(fleet.ShardDefaultLabel, "true"))
		} else {
			g.Expect(podLabels).NotTo(HaveKey(fleet.ShardDefaultLabel))
		}
		g.Expect(d.Spec.Template.Spec.NodeSelector).To(HaveKeyWithValue("kubernetes.io/os", "linux"))
		// Each Deployment's selector takes its own pods and no other's.
		for other, od := range deps {
			sel, err := labels.ValidatedSelectorFromSet(d.Spec.Selector.MatchLabels)
			g.Expect(err).NotTo(HaveOccurred())
			g.Expect(sel.Matches(labels.Set(od.Spec.Template.Labels))).To(Equal(other == name), "%s's selector and %s's pods", name, other)
		}
	}
	g.Expect(deps["fleet-manager-shard-shard1"].Spec.Template.Spec.NodeSelector).To(HaveKeyWithValue("zone", "a"))
	g.Expect(deps["fleet-manager"].Spec.Template.Spec.NodeSelector).NotTo(HaveKey("zone"))
	// The default shard's selector is the one it always had: an upgrade
	// cannot change a Deployment's selector.
	g.Expect(deps["fleet-manager"].Spec.Selector.MatchLabels).To(Equal(map[string]string{"app": "fleet-manager"}))

	// An ID that cannot name a Deployment is refused by the chart.
	_, err = renderDeployments(g, map[string]any{"shards": []any{map[string]any{"id": "Shard_1"}}})
	g.Expect(err).To(MatchError(ContainSubstring("shards")))
}

// An invalid shard ID stops the manager before it starts, naming the flag.
func TestInvalidShardIDIsRefused(t *testing.T) {
	g := NewWithT(t)
	cmd := newCommand()
	cmd.SetArgs([]string{"--shard-id=not a label/value", "--kubeconfig=/nonexistent"})
	cmd.SetOut(&discard{})
	cmd.SetErr(&discard{})
	err := cmd.Execute()
	g.Expect(err).To(MatchError(And(ContainSubstring("--shard-id"), ContainSubstring(fleet.ShardRefLabel), ContainSubstring("not a label/value"))))

	// The options' own check, for whoever calls controllers.Run directly.
	err = controllers.Run(t.Context(), nil, controllers.RunOptions{Options: controllers.Options{ShardID: "-bad"}})
	g.Expect(err).To(MatchError(ContainSubstring(`invalid shard ID "-bad"`)))
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
