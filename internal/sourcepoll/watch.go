package sourcepoll

import (
	"context"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/cacheindex"
	"github.com/gitfleet/fleet/internal/enqueue"
)

// DeploymentCoalesce is how long the changes of BundleDeployments, which
// come in bursts, are gathered before their object is reconciled.
const DeploymentCoalesce = 3 * time.Second

// DeploymentKey is the index key ("namespace/name") of the object a
// BundleDeployment's Bundle was made from, by the label that names it
// (fleet.RepoLabel, fleet.HelmOpLabel): "" when it has none.
func DeploymentKey(bd client.Object, label string) string {
	return cacheindex.LabelKey(bd, fleet.BundleNamespaceLabel, label)
}

// IndexDeployments indexes the cache's BundleDeployments by DeploymentKey
// of label, under index (fleet.RepoIndex, fleet.HelmOpIndex), and returns
// the index: status.resources is computed from the BundleDeployments it
// finds.
func IndexDeployments(mgr ctrl.Manager, index, label string) (toolscache.Indexer, error) {
	key := func(bd client.Object) string { return DeploymentKey(bd, label) }
	return cacheindex.For(context.Background(), mgr.GetCache(), &fleet.BundleDeployment{}, toolscache.Indexers{index: cacheindex.KeyIndex(key)})
}

// Watches adds to b the watches of an object that makes Bundles labelled
// label=its name: those Bundles (their status is rolled up), their
// BundleDeployments (coalesced, for status.resources) and the
// GitRepoRestrictions and Policies of its namespace (a changed restriction
// or Policy applies at once). newList returns an empty list of the objects (a GitRepoList),
// read from c to map a restriction to them.
func Watches(b *builder.Builder, c client.Reader, label string, newList func() client.ObjectList) *builder.Builder {
	return b.
		Watches(&fleet.Bundle{}, handler.EnqueueRequestsFromMapFunc(bundleRequests(label)),
			builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetLabels()[label] != "" }), rollupChanged(label))).
		Watches(&fleet.GitRepoRestriction{}, handler.EnqueueRequestsFromMapFunc(namespaceRequests(c, newList))).
		Watches(&fleet.Policy{}, handler.EnqueueRequestsFromMapFunc(namespaceRequests(c, newList))).
		Watches(&fleet.BundleDeployment{}, enqueue.After(DeploymentCoalesce, deploymentRequests(label)))
}

// rollupChanged lets through the Bundle events that may change what the
// object its label names shows of its Bundles (Rollup, which reads their
// names, summaries and Ready conditions, and which Bundles carry the
// label): all but the updates that change neither what Rollup reads, nor
// that label, nor the deletion timestamp, such as the object's own sync
// writing a Bundle's spec, or the bundle controller then writing the
// Bundle's observedGeneration and content hash. A commit that changes a
// hundred GitRepos' Bundles brings each GitRepo back once, for its sync.
func rollupChanged(label string) predicate.Funcs {
	return predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		o, ok1 := e.ObjectOld.(*fleet.Bundle)
		n, ok2 := e.ObjectNew.(*fleet.Bundle)
		if !ok1 || !ok2 {
			return true
		}
		return o.Labels[label] != n.Labels[label] || !o.DeletionTimestamp.Equal(n.DeletionTimestamp) || RollupInputChanged(o, n)
	}}
}

// bundleRequests maps a Bundle to the object its label names.
func bundleRequests(label string) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		name := o.GetLabels()[label]
		if name == "" {
			return nil
		}
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: name}}}
	}
}

// deploymentRequests maps a BundleDeployment to the object its Bundle was
// made from.
func deploymentRequests(label string) handler.MapFunc {
	return func(_ context.Context, o client.Object) []reconcile.Request {
		if DeploymentKey(o, label) == "" {
			return nil
		}
		l := o.GetLabels()
		return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: l[fleet.BundleNamespaceLabel], Name: l[label]}}}
	}
}

// namespaceRequests maps an object to every object of newList's kind in
// its namespace.
func namespaceRequests(c client.Reader, newList func() client.ObjectList) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		list := newList()
		if err := c.List(ctx, list, client.InNamespace(o.GetNamespace())); err != nil {
			// The cache only fails before it has synced; every object is
			// then reconciled from scratch anyway.
			return nil
		}
		var reqs []reconcile.Request
		_ = meta.EachListItem(list, func(obj runtime.Object) error {
			if co, ok := obj.(client.Object); ok {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(co)})
			}
			return nil
		})
		return reqs
	}
}
