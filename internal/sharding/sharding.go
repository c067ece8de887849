package sharding

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
)

// Validate checks a shard ID: "" (the default shard) or a valid label
// value, as it is matched against the fleet.cattle.io/shard-ref label.
func Validate(id string) error {
	if id == "" {
		return nil
	}
	if errs := validation.IsValidLabelValue(id); len(errs) > 0 {
		return fmt.Errorf("invalid shard ID %q: it must be a valid value of the %s label: %s", id, fleet.ShardRefLabel, strings.Join(errs, "; "))
	}
	return nil
}

// Owns tells whether the manager of shard handles o: o's
// fleet.cattle.io/shard-ref label is shard, or, for the default shard
// (""), o has no such label.
func Owns(shard string, o metav1.Object) bool {
	ref, ok := o.GetLabels()[fleet.ShardRefLabel]
	if shard == "" {
		return !ok
	}
	return ok && ref == shard
}

// Predicate lets through the events of the objects shard owns (see Owns).
func Predicate(shard string) predicate.Funcs {
	return predicate.NewPredicateFuncs(func(o client.Object) bool { return Owns(shard, o) })
}

// RefChanged lets through the updates that move an object from one shard
// to another (its fleet.cattle.io/shard-ref label changed), for
// controllers that otherwise react to spec changes only: the manager of
// the shard it moves to must take it up.
func RefChanged() predicate.Funcs {
	return predicate.Funcs{
		CreateFunc:  func(event.CreateEvent) bool { return false },
		DeleteFunc:  func(event.DeleteEvent) bool { return false },
		GenericFunc: func(event.GenericEvent) bool { return false },
		UpdateFunc: func(e event.UpdateEvent) bool {
			o, oldOK := e.ObjectOld.GetLabels()[fleet.ShardRefLabel]
			n, newOK := e.ObjectNew.GetLabels()[fleet.ShardRefLabel]
			return o != n || oldOK != newOK
		},
	}
}

// Selector selects the objects of shard: labelled with it, or, for the
// default shard, without the label.
func Selector(shard string) labels.Selector {
	op, values := selection.Equals, []string{shard}
	if shard == "" {
		op, values = selection.DoesNotExist, nil
	}
	req, err := labels.NewRequirement(fleet.ShardRefLabel, op, values)
	if err != nil {
		// Only an invalid shard ID fails here, and Validate refuses it at start.
		return labels.Nothing()
	}
	return labels.NewSelector().Add(*req)
}

// CacheByObject restricts the cache of a sharded manager to its own
// GitRepos, HelmOps, Bundles and BundleDeployments: it holds nothing of the
// other shards. The default shard keeps every object: its Cluster and
// ClusterGroup status counts every BundleDeployment, whatever its shard.
func CacheByObject(shard string) map[client.Object]cache.ByObject {
	if shard == "" {
		return nil
	}
	sel := Selector(shard)
	return map[client.Object]cache.ByObject{
		&fleet.GitRepo{}:          {Label: sel},
		&fleet.HelmOp{}:           {Label: sel},
		&fleet.Bundle{}:           {Label: sel},
		&fleet.BundleDeployment{}: {Label: sel},
	}
}

// LeaderElectionID is the name of the Lease the replicas of shard's
// manager elect their leader with, one per shard so that each shard has
// its own leader. A shard ID that is not a lowercase DNS label (it may
// hold capitals and underscores) is made one and a hash of it appended,
// so that two shards never share a Lease.
func LeaderElectionID(base, shard string) string {
	if shard == "" {
		return base
	}
	name := "shard-" + shard
	if len(validation.IsDNS1123Label(name)) > 0 {
		sum := sha256.Sum256([]byte(shard))
		safe := strings.Trim(strings.Map(func(r rune) rune {
			switch {
			case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '-':
				return r
			case r >= 'A' && r <= 'Z':
				return r - 'A' + 'a'
			}
			return '-'
		}, shard), "-")
		if len(safe) > 40 {
			safe = safe[:40]
		}
		name = strings.TrimRight("shard-"+safe, "-") + "-" + hex.EncodeToString(sum[:])[:8]
	}
	return name + "." + base
}
