package monitor

import (
	"context"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"
)

const releaseIndex = "release"

// Watcher watches, in the agent's own cluster, the objects labelled with a
// release (NameLabel and NamespaceLabel), one informer per kind, started on
// first use. OnChange is called with the release of every object added,
// changed or deleted.
type Watcher struct {
	Dynamic dynamic.Interface
	Mapper  meta.RESTMapper
	// NameLabel and NamespaceLabel hold an object's release.
	NameLabel, NamespaceLabel string
	// OnChange is told the release of each changed object.
	OnChange func(releaseNamespace, releaseName string)

	mu sync.Mutex
	// started is set by Start; stop is the Done channel of Start's context,
	// which ends the informers.
	started   bool
	stop      <-chan struct{}
	informers map[schema.GroupVersionResource]cache.SharedIndexInformer
}

// Start lets the Watcher start informers until ctx ends. It implements
// controller-runtime's manager.Runnable.
func (w *Watcher) Start(ctx context.Context) error {
	w.mu.Lock()
	w.started, w.stop = true, ctx.Done()
	w.mu.Unlock()
	<-ctx.Done()
	return nil
}

// NeedLeaderElection is false: the agent's cluster is watched by its only
// agent.
func (w *Watcher) NeedLeaderElection() bool { return false }

func (w *Watcher) informer(gvr schema.GroupVersionResource) cache.SharedIndexInformer {
	w.mu.Lock()
	defer w.mu.Unlock()
	if inf, ok := w.informers[gvr]; ok || !w.started {
		return inf
	}
	if w.informers == nil {
		w.informers = map[schema.GroupVersionResource]cache.SharedIndexInformer{}
	}
	req, _ := labels.NewRequirement(w.NameLabel, selection.Exists, nil)
	sel := labels.NewSelector().Add(*req).String()
	inf := dynamicinformer.NewFilteredDynamicInformer(w.Dynamic, gvr, metav1.NamespaceAll, 0,
		cache.Indexers{releaseIndex: w.releaseOf}, func(o *metav1.ListOptions) { o.LabelSelector = sel }).Informer()
	notify := func(obj interface{}) {
		if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = d.Obj
		}
		if o, ok := obj.(metav1.Object); ok && w.OnChange != nil {
			l := o.GetLabels()
			w.OnChange(l[w.NamespaceLabel], l[w.NameLabel])
		}
	}
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    notify,
		UpdateFunc: func(_, n interface{}) { notify(n) },
		DeleteFunc: notify,
	})
	go inf.Run(w.stop)
	w.informers[gvr] = inf
	return inf
}

func (w *Watcher) releaseOf(obj interface{}) ([]string, error) {
	o, ok := obj.(metav1.Object)
	if !ok {
		return nil, nil
	}
	l := o.GetLabels()
	return []string{l[w.NamespaceLabel] + "/" + l[w.NameLabel]}, nil
}

// Live returns the live copies of the desired objects (absent when
// missing) and the extra objects: of the same kinds, labelled for the
// release, not desired. It reads from the informers once they have synced,
// from the API server before, or when fresh is set.
func (w *Watcher) Live(ctx context.Context, releaseNamespace, releaseName string, desired []*unstructured.Unstructured, fresh bool) (map[Key]*unstructured.Unstructured, []*unstructured.Unstructured, error) {
	live := map[Key]*unstructured.Unstructured{}
	want := map[Key]bool{}
	byGVK := map[schema.GroupVersionKind][]*unstructured.Unstructured{}
	for _, d := range desired {
		want[KeyOf(d)] = true
		byGVK[d.GroupVersionKind()] = append(byGVK[d.GroupVersionKind()], d)
	}
	var extra []*unstructured.Unstructured
	for gvk, objs := range byGVK {
		m, err := w.Mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
		if err != nil {
			if meta.IsNoMatchError(err) {
				if r, ok := w.Mapper.(meta.ResettableRESTMapper); ok {
					r.Reset()
				}
				continue // the kind is gone: every object of it is missing
			}
			return nil, nil, err
		}
		inf := w.informer(m.Resource)
		synced := !fresh && inf != nil && inf.HasSynced()
		res := w.Dynamic.Resource(m.Resource)
		for _, d := range objs {
			var o *unstructured.Unstructured
			if synced {
				key := d.GetName()
				if d.GetNamespace() != "" {
					key = d.GetNamespace() + "/" + key
				}
				if item, ok, _ := inf.GetIndexer().GetByKey(key); ok {
					o, _ = item.(*unstructured.Unstructured)
				}
			}
			if o == nil {
				// Not in the informer (not synced, or its labels were
				// removed): ask the API server.
				got, err := res.Namespace(d.GetNamespace()).Get(ctx, d.GetName(), metav1.GetOptions{})
				if err != nil && !apierrors.IsNotFound(err) {
					return nil, nil, fmt.Errorf("reading %s %s/%s: %w", gvk.Kind, d.GetNamespace(), d.GetName(), err)
				}
				if err == nil {
					o = got
				}
			}
			if o != nil {
				live[KeyOf(d)] = o
			}
		}
		var all []*unstructured.Unstructured
		if synced {
			items, _ := inf.GetIndexer().ByIndex(releaseIndex, releaseNamespace+"/"+releaseName)
			for _, it := range items {
				if u, ok := it.(*unstructured.Unstructured); ok {
					all = append(all, u)
				}
			}
		} else {
			sel := labels.Set{w.NameLabel: releaseName, w.NamespaceLabel: releaseNamespace}.String()
			list, err := res.List(ctx, metav1.ListOptions{LabelSelector: sel})
			if err != nil {
				return nil, nil, fmt.Errorf("listing %s of release %s/%s: %w", gvk.Kind, releaseNamespace, releaseName, err)
			}
			for i := range list.Items {
				all = append(all, &list.Items[i])
			}
		}
		for _, o := range all {
			if !want[KeyOf(o)] && o.GetDeletionTimestamp() == nil {
				extra = append(extra, o)
			}
		}
	}
	return live, extra, nil
}
