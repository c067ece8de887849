package managermove

import (
	"context"
	"fmt"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// releases are Helm's release records in the release namespace, by name.
func releases(ctx context.Context, c client.Client) map[string]types.UID {
	GinkgoHelper()
	list := &corev1.SecretList{}
	Expect(c.List(ctx, list, client.InNamespace(releaseNS), client.MatchingLabels{"owner": "helm"})).To(Succeed())
	out := map[string]types.UID{}
	for _, s := range list.Items {
		out[s.Name] = s.UID
	}
	return out
}

// deletionWatch records every ConfigMap and Secret deleted in a namespace
// from the moment it starts, so that a delete followed by a quick
// re-create cannot pass unseen.
type deletionWatch struct {
	mu      sync.Mutex
	deleted []string
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

func watchDeletions(ctx context.Context, c client.WithWatch, namespace string) *deletionWatch {
	GinkgoHelper()
	ctx, cancel := context.WithCancel(ctx)
	w := &deletionWatch{cancel: cancel}
	for _, list := range []client.ObjectList{&corev1.ConfigMapList{}, &corev1.SecretList{}} {
		// Watch from the list's version: nothing between list and watch is
		// missed.
		Expect(c.List(ctx, list, client.InNamespace(namespace))).To(Succeed())
		rv := list.(metav1.ListInterface).GetResourceVersion()
		w.wg.Add(1)
		go func() {
			defer GinkgoRecover()
			defer w.wg.Done()
			w.follow(ctx, c, list, namespace, rv)
		}()
	}
	return w
}

func (w *deletionWatch) follow(ctx context.Context, c client.WithWatch, list client.ObjectList, namespace, rv string) {
	for ctx.Err() == nil {
		wi, err := c.Watch(ctx, list, client.InNamespace(namespace),
			&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, AllowWatchBookmarks: true}})
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(200 * time.Millisecond):
			}
			continue
		}
		for ev := range wi.ResultChan() {
			if ev.Type == watch.Error {
				// Its place expired: a deletion could pass unseen.
				w.record(fmt.Sprintf("the watch failed: %v", apierrors.FromObject(ev.Object)))
				wi.Stop()
				return
			}
			obj, ok := ev.Object.(client.Object)
			if !ok {
				continue
			}
			rv = obj.GetResourceVersion()
			if ev.Type == watch.Deleted {
				w.record(fmt.Sprintf("%T %s deleted at resourceVersion %s", obj, obj.GetName(), rv))
			}
		}
		wi.Stop()
	}
}

func (w *deletionWatch) record(s string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.deleted = append(w.deleted, s)
}

// seen returns the deletions recorded so far.
func (w *deletionWatch) seen() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.deleted...)
}

func (w *deletionWatch) stop() {
	w.cancel()
	w.wg.Wait()
}
