package summary

import (
	"sort"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// MaxPerClusterCounts bounds perClusterResourceCounts: a GitRepo on more
// clusters lists the first of them by "namespace/name" (resourceCounts
// stays exact), so its status stays well below the API server's object
// size limit.
const MaxPerClusterCounts = 1000

// PerClusterCounts sums the deployments' resource counts per cluster, keyed
// by the cluster's "namespace/name" (Fleet's perClusterResourceCounts). Nil
// for no deployments, so the field is left out.
func PerClusterCounts(bds []*fleet.BundleDeployment) map[string]*fleet.ResourceCounts {
	if len(bds) == 0 {
		return nil
	}
	all := map[string]*fleet.ResourceCounts{}
	for _, bd := range bds {
		id := clusterID(bd)
		c := all[id]
		if c == nil {
			c = &fleet.ResourceCounts{}
			all[id] = c
		}
		AddCounts(c, bd.Status.ResourceCounts)
	}
	if len(all) <= MaxPerClusterCounts {
		return all
	}
	ids := make([]string, 0, len(all))
	for id := range all {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	out := make(map[string]*fleet.ResourceCounts, MaxPerClusterCounts)
	for _, id := range ids[:MaxPerClusterCounts] {
		out[id] = all[id]
	}
	return out
}
