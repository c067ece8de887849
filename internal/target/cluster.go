package target

import (
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// ClusterInfo is what matching needs to know about one Cluster. Build it once
// per Cluster version (ClusterInfoFor does) and reuse it for every bundle.
type ClusterInfo struct {
	// Name is the Cluster's name, for a target's clusterName.
	Name string
	// Namespace is the Cluster's namespace (its workspace).
	Namespace string
	// Labels are the Cluster's labels, for clusterSelector.
	Labels map[string]string
	// Groups are the ClusterGroups of the Cluster's namespace whose selector
	// matches the Cluster, for clusterGroup and clusterGroupSelector.
	Groups []GroupInfo
}

// GroupInfo is a ClusterGroup a cluster belongs to.
type GroupInfo struct {
	// Name is the ClusterGroup's name.
	Name string
	// Labels are the ClusterGroup's own labels, for clusterGroupSelector.
	Labels map[string]string
}

// CompiledGroup is a ClusterGroup with its selector parsed once.
type CompiledGroup struct {
	// Name is the ClusterGroup's name.
	Name string
	// Namespace is the ClusterGroup's namespace; it only selects Clusters
	// there.
	Namespace string
	// Labels are the ClusterGroup's labels, for clusterGroupSelector.
	Labels map[string]string
	// Generation is the generation the group was compiled from; a label change
	// does not bump it, so callers caching by version should also compare
	// ResourceVersion.
	Generation int64
	// ResourceVersion is the resourceVersion the group was compiled from.
	ResourceVersion string

	selector labels.Selector
}

// CompileGroup parses the selector of g. As in Fleet, an unset selector
// matches no cluster and an empty selector ({}) matches every cluster of the
// group's namespace.
func CompileGroup(g *fleet.ClusterGroup) (*CompiledGroup, error) {
	sel, err := metav1.LabelSelectorAsSelector(g.Spec.Selector) // nil gives labels.Nothing()
	if err != nil {
		return nil, fmt.Errorf("clustergroup %s/%s: selector: %w", g.Namespace, g.Name, err)
	}
	return &CompiledGroup{
		Name:            g.Name,
		Namespace:       g.Namespace,
		Labels:          g.Labels,
		Generation:      g.Generation,
		ResourceVersion: g.ResourceVersion,
		selector:        sel,
	}, nil
}

// Matches reports whether the group's selector selects a cluster with these
// labels. It does not look at namespaces: the caller only asks about clusters
// of the group's namespace.
func (g *CompiledGroup) Matches(clusterLabels map[string]string) bool {
	return g.selector.Matches(labels.Set(clusterLabels))
}

// Info is the group as a cluster's GroupInfo.
func (g *CompiledGroup) Info() GroupInfo {
	return GroupInfo{Name: g.Name, Labels: g.Labels}
}

// ClusterInfoFor describes cluster for matching, with the groups among groups
// that are in its namespace and select it. groups may hold groups of any
// namespace.
func ClusterInfoFor(cluster *fleet.Cluster, groups []*CompiledGroup) *ClusterInfo {
	info := &ClusterInfo{Name: cluster.Name, Namespace: cluster.Namespace, Labels: cluster.Labels}
	for _, g := range groups {
		if g.Namespace == cluster.Namespace && g.Matches(cluster.Labels) {
			info.Groups = append(info.Groups, g.Info())
		}
	}
	return info
}
