// Package cleanup is `fleet cleanup clusterregistration`: it picks the
// ClusterRegistrations that are done with and may go, as Fleet's cleanup
// does, without ever taking the registration an agent's credential hangs on.
// Deleting a registration revokes the credential it granted (its
// finalizer), so the newest granted registration of a Cluster that exists is
// always kept.
package cleanup

import (
	"fmt"
	"sort"
	"time"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Removal is a registration to delete and why.
type Removal struct {
	Registration *fleet.ClusterRegistration
	Why          string
}

// Registrations picks, among regs, those to delete: granted ones superseded
// by a newer granted registration of the same cluster; granted ones whose
// Cluster no longer exists (orphaned); and requests never granted that are
// older than pendingAfter (abandoned).
func Registrations(regs []fleet.ClusterRegistration, clusters []fleet.Cluster, now time.Time, pendingAfter time.Duration) []Removal {
	exists := map[string]bool{}
	for _, c := range clusters {
		exists[c.Namespace+"/"+c.Name] = true
	}
	newest := map[string]*fleet.ClusterRegistration{}
	for i := range regs {
		r := &regs[i]
		if !r.Status.Granted || r.Status.ClusterName == "" {
			continue
		}
		k := r.Namespace + "/" + r.Status.ClusterName
		if n := newest[k]; n == nil || newer(r, n) {
			newest[k] = r
		}
	}
	var out []Removal
	for i := range regs {
		r := &regs[i]
		if r.DeletionTimestamp != nil {
			continue
		}
		k := r.Namespace + "/" + r.Status.ClusterName
		switch {
		case !r.Status.Granted:
			if age := now.Sub(r.CreationTimestamp.Time); age > pendingAfter {
				out = append(out, Removal{r, fmt.Sprintf("never granted, requested %s ago", age.Round(time.Second))})
			}
		case r.Status.ClusterName == "":
		case !exists[k]:
			out = append(out, Removal{r, "orphaned: Cluster " + k + " no longer exists"})
		case newest[k] != r:
			out = append(out, Removal{r, "done: superseded by " + newest[k].Name})
		}
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i].Registration, out[j].Registration
		return a.Namespace+"/"+a.Name < b.Namespace+"/"+b.Name
	})
	return out
}

func newer(a, b *fleet.ClusterRegistration) bool {
	if !a.CreationTimestamp.Equal(&b.CreationTimestamp) {
		return a.CreationTimestamp.After(b.CreationTimestamp.Time)
	}
	return a.Name > b.Name
}
