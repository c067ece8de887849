// Package cacheindex reads a controller-runtime cache's index in place. A
// List from the cache copies every matching object into the list, even with
// UnsafeDisableDeepCopy; at thousands of clusters the controllers that walk
// every Cluster or BundleDeployment of a bundle on each pass spent most of
// their memory on those copies. The objects an Indexer returns are the
// cache's own: read them, never change them.
package cacheindex

import (
	"context"
	"fmt"

	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// For returns the index of obj's informer in c, after adding indexers to it.
// Every informer has toolscache.NamespaceIndex.
func For(ctx context.Context, c cache.Cache, obj client.Object, indexers toolscache.Indexers) (toolscache.Indexer, error) {
	inf, err := c.GetInformer(ctx, obj)
	if err != nil {
		return nil, err
	}
	if len(indexers) > 0 {
		if err := inf.AddIndexers(indexers); err != nil {
			return nil, fmt.Errorf("indexing %T: %w", obj, err)
		}
	}
	indexed, ok := inf.(interface{ GetIndexer() toolscache.Indexer })
	if !ok {
		return nil, fmt.Errorf("the %T informer (%T) does not expose its index", obj, inf)
	}
	return indexed.GetIndexer(), nil
}

// Objects returns the objects of type T under key in index, as the cache
// holds them.
func Objects[T any](idx toolscache.Indexer, index, key string) ([]*T, error) {
	items, err := idx.ByIndex(index, key)
	if err != nil {
		return nil, err
	}
	out := make([]*T, 0, len(items))
	for _, item := range items {
		if o, ok := item.(*T); ok {
			out = append(out, o)
		}
	}
	return out, nil
}

// LabelKey is "<namespace>/<name>" read from o's labels nsLabel and
// nameLabel: how a generated object names what it was made from. It is ""
// unless both are set.
func LabelKey(o client.Object, nsLabel, nameLabel string) string {
	l := o.GetLabels()
	if l[nsLabel] == "" || l[nameLabel] == "" {
		return ""
	}
	return l[nsLabel] + "/" + l[nameLabel]
}

// KeyIndex indexes objects by key, leaving out those whose key is "".
func KeyIndex(key func(client.Object) string) toolscache.IndexFunc {
	return func(obj any) ([]string, error) {
		if o, ok := obj.(client.Object); ok {
			if k := key(o); k != "" {
				return []string{k}, nil
			}
		}
		return nil, nil
	}
}
