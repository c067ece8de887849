package dashboard

import (
	"strings"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/names"
	"github.com/gitfleet/fleet/internal/summary"
)

// AgentVersion is the agent a cluster runs, as the manager records it: the
// image of the cluster's agent Bundle (fleet.AgentImageAnnotation, what
// `fleet analyze`'s agent-outdated check reads), and whether the cluster's
// agent has deployed that Bundle's current version (its BundleDeployment
// carries the Bundle's fleet.AgentBundleHashLabel and is Ready or
// Modified, as the agent rollout judges it).
type AgentVersion struct {
	// Image is the agent Bundle's image; empty when the cluster has no
	// agent Bundle (agent Bundles off, or not registered yet).
	Image string
	// Version is the image's tag (or digest), for the list.
	Version string
	// Rolling is true while the cluster's agent has not deployed Image
	// yet: it still runs an earlier version.
	Rolling bool
}

// Text is the version as the clusters list shows it.
func (a AgentVersion) Text() string {
	switch {
	case a.Image == "":
		return "unknown"
	case a.Rolling:
		return a.Version + " (rolling out)"
	}
	return a.Version
}

// Title explains the version, for a tooltip.
func (a AgentVersion) Title() string {
	switch {
	case a.Image == "":
		return "No agent Bundle: the agent runs the image it was installed with (agent Bundles off, or the cluster has not registered)"
	case a.Rolling:
		return "The manager gives this cluster " + a.Image + "; its agent has not deployed it yet (a rollout partition may hold it, or the cluster is offline)"
	}
	return a.Image
}

// agentVersionOf reads a cluster's agent version from its agent Bundle b
// and that Bundle's BundleDeployment bd (either may be nil).
func agentVersionOf(b *fleet.Bundle, bd *fleet.BundleDeployment) AgentVersion {
	if b == nil || b.Labels[fleet.AgentBundleLabel] != "true" || b.Annotations[fleet.AgentImageAnnotation] == "" {
		return AgentVersion{}
	}
	img := b.Annotations[fleet.AgentImageAnnotation]
	a := AgentVersion{Image: img, Version: imageVersion(img), Rolling: true}
	if bd != nil && bd.Labels[fleet.AgentBundleHashLabel] == b.Labels[fleet.AgentBundleHashLabel] {
		switch summary.State(bd) {
		case fleet.Ready, fleet.Modified:
			a.Rolling = false
		}
	}
	return a
}

// imageVersion is an image reference's tag, else its digest (shortened),
// else the whole reference ("latest" is implied, but saying so would be a
// guess).
func imageVersion(img string) string {
	ref, digest, _ := strings.Cut(img, "@")
	name := ref[strings.LastIndex(ref, "/")+1:]
	if _, tag, ok := strings.Cut(name, ":"); ok {
		return tag
	}
	if digest != "" {
		return digest[:min(len(digest), len("sha256:")+12)]
	}
	return img
}

// isAgentBundle tells an agent Bundle (one per cluster, made by the
// manager) from the bundles people deploy.
func isAgentBundle(b *fleet.Bundle) bool {
	return b.Labels[fleet.AgentBundleLabel] == "true"
}

// agentVersions reads every cluster's agent version from the snapshot.
func agentVersions(s *Snapshot, cells map[key]map[key]*fleet.BundleDeployment) map[key]AgentVersion {
	out := map[key]AgentVersion{}
	bundles := map[key]*fleet.Bundle{}
	for i := range s.Bundles {
		if b := &s.Bundles[i]; isAgentBundle(b) {
			bundles[key{b.Namespace, b.Name}] = b
		}
	}
	if len(bundles) == 0 {
		return out
	}
	for i := range s.Clusters {
		c := &s.Clusters[i]
		ck := key{c.Namespace, c.Name}
		bk := key{c.Namespace, names.AgentBundle(c.Name)}
		if b := bundles[bk]; b != nil {
			out[ck] = agentVersionOf(b, cells[bk][ck])
		}
	}
	return out
}
