package summary

import (
	"sort"
	"strings"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Bounds of status.resources: a repository deploying thousands of objects to
// thousands of clusters must not make its GitRepo too large to write. The
// counts in status.resourceCounts stay exact whatever is cut here.
const (
	// maxResources is the most resources listed.
	maxResources = 1000
	// maxClustersPerState is the most clusters listed under one state of one
	// resource's perClusterState.
	maxClustersPerState = 10
)

// Per-resource states, Fleet's words for them.
const (
	resourceReady       = "Ready"
	resourceNotReady    = "NotReady"
	resourceWaitApplied = "WaitApplied"
	resourcePending     = "Pending"
	resourceModified    = "Modified"
	resourceOrphaned    = "Orphaned"
	resourceMissing     = "Missing"
	resourceUnknown     = "Unknown"
)

// resourceKey identifies one deployed object across clusters.
type resourceKey struct {
	apiVersion, kind, namespace, name string
}

// clusterEntry is the state of one resource on one cluster.
type clusterEntry struct {
	cluster string
	// state is the per-cluster list it goes to (resourceReady ...); shown is
	// the word shown as the resource's state, the agent's summary state for
	// a not-ready object (e.g. "updating"), else state.
	state, shown string
	summary      *fleet.Summary
	incomplete   bool
}

// Resources computes the status.resources and status.resourceCounts of a
// GitRepo or HelmOp from its BundleDeployments, as Fleet does: every
// object a deployment lists in status.resources, with the state its
// nonReadyStatus and modifiedStatus give it on that cluster, or else the
// state of the deployment (Ready for a deployment that is only not ready or
// modified elsewhere). Counts are the sum of the deployments' counts. The
// list is sorted by type and id, at most maxResources long, each state of
// perClusterState at most maxClustersPerState long (incompleteState is then
// set). The deployments are read, never changed (they may be the cache's).
func Resources(bds []*fleet.BundleDeployment) ([]fleet.GitRepoResource, fleet.ResourceCounts) {
	var counts fleet.ResourceCounts
	// The cluster of each deployment is read once, not at every comparison:
	// a GitRepo of many clusters sorts thousands.
	sorted := make([]clusterDeployment, len(bds))
	for i, bd := range bds {
		sorted[i] = clusterDeployment{cluster: clusterID(bd), bd: bd}
	}
	sort.Slice(sorted, func(i, j int) bool {
		if sorted[i].cluster != sorted[j].cluster {
			return sorted[i].cluster < sorted[j].cluster
		}
		return sorted[i].bd.Name < sorted[j].bd.Name
	})
	byKey := map[resourceKey][]clusterEntry{}
	entries := map[resourceKey]clusterEntry{}
	for _, d := range sorted {
		AddCounts(&counts, d.bd.Status.ResourceCounts)
		clear(entries)
		deploymentEntries(entries, d.cluster, d.bd)
		for k, e := range entries {
			byKey[k] = append(byKey[k], e)
		}
	}
	out := make([]fleet.GitRepoResource, 0, len(byKey))
	for k, entries := range byKey {
		out = append(out, aggregate(k, entries))
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Type != out[j].Type {
			return out[i].Type < out[j].Type
		}
		return out[i].ID < out[j].ID
	})
	if len(out) > maxResources {
		out = out[:maxResources]
	}
	if len(out) == 0 {
		out = nil
	}
	return out, counts
}

// clusterDeployment is a deployment with the id of its cluster.
type clusterDeployment struct {
	cluster string
	bd      *fleet.BundleDeployment
}

// deploymentEntries puts into out the state of each object of one
// deployment on its cluster.
func deploymentEntries(out map[resourceKey]clusterEntry, cluster string, bd *fleet.BundleDeployment) {
	incomplete := bd.Status.IncompleteState
	def := defaultState(bd)
	for _, r := range bd.Status.Resources {
		out[resourceKey{r.APIVersion, r.Kind, r.Namespace, r.Name}] = clusterEntry{cluster: cluster, state: def, shown: def, incomplete: incomplete}
	}
	for i := range bd.Status.NonReadyStatus {
		n := &bd.Status.NonReadyStatus[i]
		shown := n.Summary.State
		if shown == "" {
			shown = resourceNotReady
		}
		out[resourceKey{n.APIVersion, n.Kind, n.Namespace, n.Name}] = clusterEntry{cluster: cluster, state: resourceNotReady, shown: shown,
			summary: &n.Summary, incomplete: incomplete}
	}
	for _, m := range bd.Status.ModifiedStatus {
		st := resourceModified
		switch {
		case m.Delete:
			st = resourceOrphaned
		case m.Create:
			st = resourceMissing
		}
		out[resourceKey{m.APIVersion, m.Kind, m.Namespace, m.Name}] = clusterEntry{cluster: cluster, state: st, shown: st, incomplete: incomplete}
	}
}

// defaultState is the state of a deployment's objects that its
// nonReadyStatus and modifiedStatus do not name. A deployment that is only
// not ready or modified names the objects that are: the others are Ready,
// or Unknown when the agent cut its lists. Otherwise the deployment's state
// holds for all of them: WaitApplied (ErrApplied too: the objects are those
// of the last applied deployment) or Pending while a newer deployment is
// staged (OutOfSync).
func defaultState(bd *fleet.BundleDeployment) string {
	switch State(bd) {
	case fleet.NotReady, fleet.Modified, fleet.Ready:
		if bd.Status.IncompleteState {
			return resourceUnknown
		}
		return resourceReady
	case fleet.WaitApplied, fleet.ErrApplied:
		return resourceWaitApplied
	case fleet.OutOfSync:
		return resourcePending
	}
	return resourceUnknown
}

// aggregate is one resource over its clusters: its state the first one
// other than Ready (clusters in order), its error, transitioning and message
// those of the first cluster where the agent said why it is not ready.
func aggregate(k resourceKey, entries []clusterEntry) fleet.GitRepoResource {
	r := fleet.GitRepoResource{
		APIVersion: k.apiVersion, Kind: k.kind, Namespace: k.namespace, Name: k.name,
		Type: resourceType(k.apiVersion, k.kind), ID: resourceID(k.namespace, k.name), State: resourceReady,
	}
	explained := false
	for _, e := range entries {
		r.IncompleteState = r.IncompleteState || e.incomplete
		if !appendCluster(&r.PerClusterState, e.state, e.cluster) {
			r.IncompleteState = true
		}
		if r.State == resourceReady && e.state != resourceReady {
			r.State = e.shown
		}
		if e.summary != nil && !explained {
			explained = true
			r.Error, r.Transitioning = e.summary.Error, e.summary.Transitioning
			r.Message = strings.Join(e.summary.Message, "; ")
		}
	}
	return r
}

// appendCluster adds a cluster to the list of its state; false when the list
// is full and the cluster was left out.
func appendCluster(p *fleet.PerClusterState, state, cluster string) bool {
	var list *[]string
	switch state {
	case resourceReady:
		list = &p.Ready
	case resourceNotReady:
		list = &p.NotReady
	case resourceWaitApplied:
		list = &p.WaitApplied
	case resourcePending:
		list = &p.Pending
	case resourceModified:
		list = &p.Modified
	case resourceOrphaned:
		list = &p.Orphaned
	case resourceMissing:
		list = &p.Missing
	default:
		list = &p.Unknown
	}
	if len(*list) >= maxClustersPerState {
		return false
	}
	*list = append(*list, cluster)
	return true
}

// clusterID is "namespace/name" of a deployment's Cluster, from its labels.
func clusterID(bd *fleet.BundleDeployment) string {
	return bd.Labels[fleet.ClusterNamespaceLabel] + "/" + bd.Labels[fleet.ClusterLabel]
}

// resourceType is Fleet's type of an object: the lower-case kind, prefixed
// with the API group and a dot when it has one ("apps.deployment",
// "configmap").
func resourceType(apiVersion, kind string) string {
	group := ""
	if i := strings.Index(apiVersion, "/"); i >= 0 {
		group = apiVersion[:i] + "."
	}
	return group + strings.ToLower(kind)
}

func resourceID(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}
