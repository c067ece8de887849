package e2e

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/onsi/ginkgo/v2"
	"github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// DeletionScope says what a DeletionWatch follows.
type DeletionScope struct {
	// Namespace is the namespace watched.
	Namespace string
	// Kinds are the lists of the kinds watched (&corev1.ConfigMapList{}...).
	Kinds []client.ObjectList
	// Name, when set, narrows the watch to the objects of that name, and a
	// new object of that name (created again after a delete) is recorded
	// too.
	Name string
	// FromVersion is the resourceVersion to watch from; "" lists each kind
	// first and watches from the list's version.
	FromVersion string
}

// DeletionWatch records every deletion in its scope from the moment it
// starts, so that a delete followed by a quick re-create cannot pass unseen
// the way it would between two polls. A watch whose place expires is
// recorded as a failure too: a deletion could have passed unseen.
type DeletionWatch struct {
	mu     sync.Mutex
	events []string
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// WatchDeletions starts a DeletionWatch with c; Stop ends it.
func WatchDeletions(ctx context.Context, c client.WithWatch, scope DeletionScope) *DeletionWatch {
	ginkgo.GinkgoHelper()
	ctx, cancel := context.WithCancel(ctx)
	w := &DeletionWatch{cancel: cancel}
	for _, list := range scope.Kinds {
		rv := scope.FromVersion
		if rv == "" {
			// Watch from the list's version: nothing between list and
			// watch is missed.
			gomega.Expect(c.List(ctx, list, client.InNamespace(scope.Namespace))).To(gomega.Succeed())
			rv = list.(metav1.ListInterface).GetResourceVersion()
		}
		w.wg.Add(1)
		go func() {
			defer ginkgo.GinkgoRecover()
			defer w.wg.Done()
			w.follow(ctx, c, list, scope, rv)
		}()
	}
	return w
}

func (w *DeletionWatch) follow(ctx context.Context, c client.WithWatch, list client.ObjectList, scope DeletionScope, rv string) {
	opts := []client.ListOption{client.InNamespace(scope.Namespace)}
	if scope.Name != "" {
		opts = append(opts, client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", scope.Name)})
	}
	for ctx.Err() == nil {
		wi, err := c.Watch(ctx, list, append(opts, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})...)
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		for ev := range wi.ResultChan() {
			if ev.Type == watch.Error {
				w.record(fmt.Sprintf("the watch failed: %v", apierrors.FromObject(ev.Object)))
				wi.Stop()
				return
			}
			obj, ok := ev.Object.(client.Object)
			if !ok {
				continue
			}
			rv = obj.GetResourceVersion()
			switch {
			case ev.Type == watch.Deleted:
				w.record(fmt.Sprintf("%T %s deleted at resourceVersion %s", obj, obj.GetName(), rv))
			case ev.Type == watch.Added && scope.Name != "":
				w.record(fmt.Sprintf("%T %s created again at resourceVersion %s", obj, obj.GetName(), rv))
			}
		}
		wi.Stop()
	}
}

func (w *DeletionWatch) record(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.events = append(w.events, s)
}

// Seen returns what was recorded so far: deletions, re-creations, failed
// watches.
func (w *DeletionWatch) Seen() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.events...)
}

// Stop ends the watch and waits for it.
func (w *DeletionWatch) Stop() {
	w.cancel()
	w.wg.Wait()
}
