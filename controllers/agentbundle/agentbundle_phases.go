package agentbundle

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/gitfleet/fleet/agentinstall"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/summary"
)

// RedeployAnnotation is the annotation, on the agent's pod template, that
// holds the Cluster's spec.redeployAgentGeneration: bumping it restarts the
// agent.
const RedeployAnnotation = "fleet.cattle.io/redeploy-agent-generation"

// BundleName names the agent Bundle of a Cluster.
func BundleName(cluster string) string {
	return names.AgentBundle(cluster)
}

// AgentNamespace is where a Cluster's agent runs: where it says it runs,
// else where the Cluster asks for it, else fleet-system.
func AgentNamespace(c *fleet.Cluster) string {
	switch {
	case c.Status.Agent.Namespace != "":
		return c.Status.Agent.Namespace
	case c.Spec.AgentNamespace != "":
		return c.Spec.AgentNamespace
	}
	return fleet.DefaultSystemNamespace
}

// Registered tells whether a Cluster has an agent to deploy its agent
// Bundle: it has checked in, and its cluster namespace is known.
func Registered(c *fleet.Cluster) bool {
	return c.DeletionTimestamp.IsZero() && !c.Status.Agent.LastSeen.IsZero() && c.Status.Namespace != ""
}

// Desired renders the agent Bundle of a Cluster with image: its Deployment,
// pulled with the Cluster's spec.agentPullSecrets or else the manager's
// pullSecrets (copied downstream by the install, never put in a Bundle), and the PriorityClass and PodDisruptionBudget its
// spec.agentSchedulingCustomization asks for, which the release removes
// when they are no longer asked for.
func Desired(c *fleet.Cluster, image string, pullPolicy corev1.PullPolicy, pullSecrets []string) (*fleet.Bundle, error) {
	o := agentinstall.ClusterOptions(&c.Spec)
	o.Namespace, o.Image, o.ImagePullPolicy = AgentNamespace(c), image, pullPolicy
	o.ImagePullSecrets, _ = agentinstall.PullSecrets(&c.Spec, pullSecrets)
	scheduling, err := agentinstall.SchedulingObjects(o)
	if err != nil {
		return nil, err
	}
	for _, obj := range scheduling {
		delete(obj.GetLabels(), agentinstall.ManagedByLabel)
	}
	dep := agentinstall.Deployment(o)
	// Helm marks what a release owns as managed by Helm; a manifest saying
	// otherwise would show the Deployment as modified for ever.
	delete(dep.Labels, agentinstall.ManagedByLabel)
	if g := c.Spec.RedeployAgentGeneration; g != 0 {
		metav1.SetMetaDataAnnotation(&dep.Spec.Template.ObjectMeta, RedeployAnnotation, strconv.FormatInt(g, 10))
	}
	manifest, err := agentinstall.YAML(append(scheduling, dep))
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(manifest)
	return &fleet.Bundle{
		TypeMeta: metav1.TypeMeta{APIVersion: fleet.GroupVersion.String(), Kind: "Bundle"},
		ObjectMeta: metav1.ObjectMeta{
			Name: BundleName(c.Name), Namespace: c.Namespace,
			Labels: map[string]string{
				fleet.AgentBundleLabel: "true", fleet.AgentBundleHashLabel: hex.EncodeToString(sum[:])[:16],
				fleet.ManagedLabel: "true",
			},
			Annotations: map[string]string{fleet.AgentImageAnnotation: image},
			// No blockOwnerDeletion: a garbage collector removes the
			// Bundle with its Cluster, and the manager needs no rights on
			// Clusters' finalizers for it.
			OwnerReferences: []metav1.OwnerReference{{APIVersion: fleet.GroupVersion.String(), Kind: "Cluster", Name: c.Name, UID: c.UID}},
		},
		Spec: fleet.BundleSpec{
			BundleDeploymentOptions: fleet.BundleDeploymentOptions{
				DefaultNamespace: o.Namespace,
				// Deleting the Bundle (or its Cluster) must not have the
				// agent uninstall itself.
				KeepResources: true,
				// The install made the Deployment; the release adopts it.
				Helm: &fleet.HelmOptions{TakeOwnership: true},
			},
			Resources: []fleet.BundleResource{{Name: "fleet-agent.yaml", Content: string(manifest)}},
			Targets:   []fleet.BundleTarget{{Name: "cluster", ClusterName: c.Name}},
		},
	}, nil
}

// Available tells whether the agent deployed its Bundle's current version
// (the BundleDeployment carries the Bundle's hash, written with its
// deploymentID) and it is Ready; a Deployment changed downstream still runs.
func Available(b *fleet.Bundle, bd *fleet.BundleDeployment) bool {
	if b == nil || bd == nil || bd.Labels[fleet.AgentBundleHashLabel] != b.Labels[fleet.AgentBundleHashLabel] {
		return false
	}
	switch summary.State(bd) {
	case fleet.Ready, fleet.Modified:
		return true
	}
	return false
}
