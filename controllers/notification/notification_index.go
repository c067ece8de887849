package notification

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	notification "github.com/gitfleet/fleet/api/notification/v1alpha1"
)

// index holds, per namespace, what the event handlers need of each
// Notification: its kinds, its compiled selector and its Secret's name. It
// is fed by the Notification informer, so that mapping a Bundle, GitRepo,
// HelmOp or Secret event to Notifications reads a map, not a List (a deep
// copy of every Notification of the namespace) and a selector parse per
// Notification per event.
//
// It lags the informer by at most one event: a Notification it does not know
// yet is enqueued by its own event and reads its sources itself.
type index struct {
	mu   sync.RWMutex
	byNS map[string]map[string]entry
}

// entry is one Notification as the index keeps it.
type entry struct {
	generation int64
	gitRepos   bool
	helmOps    bool
	// selector is nil when the Notification's does not parse: it matches
	// nothing (the Notification reports it); everything says it selects
	// every source, whatever its labels.
	selector   labels.Selector
	everything bool
	// secret is the name of spec.destination.secretRef, "" when none.
	secret string
}

func newIndex() *index { return &index{byNS: map[string]map[string]entry{}} }

func entryOf(n *notification.Notification) entry {
	e := entry{generation: n.Generation, gitRepos: follows(n, notification.KindGitRepo), helmOps: follows(n, notification.KindHelmOp)}
	if sel, err := selectorOf(n); err == nil {
		e.selector, e.everything = sel, sel.Empty()
	}
	if n.Spec.Destination.SecretRef != nil {
		e.secret = n.Spec.Destination.SecretRef.Name
	}
	return e
}

// set records n; a status update (same generation) changes nothing.
func (x *index) set(n *notification.Notification) {
	x.mu.Lock()
	defer x.mu.Unlock()
	ns := x.byNS[n.Namespace]
	if ns == nil {
		ns = map[string]entry{}
		x.byNS[n.Namespace] = ns
	}
	if old, ok := ns[n.Name]; ok && old.generation == n.Generation {
		return
	}
	ns[n.Name] = entryOf(n)
}

func (x *index) remove(namespace, name string) {
	x.mu.Lock()
	defer x.mu.Unlock()
	delete(x.byNS[namespace], name)
	if len(x.byNS[namespace]) == 0 {
		delete(x.byNS, namespace)
	}
}

// follows says whether a Notification of ns follows sources of kind, and
// whether one of them needs the source's labels to tell (a selector that
// is not empty).
func (x *index) follows(kind notification.SourceKind, ns string) (some, needLabels bool) {
	x.mu.RLock()
	defer x.mu.RUnlock()
	for _, e := range x.byNS[ns] {
		if e.follows(kind) {
			some = true
			needLabels = needLabels || !e.everything
		}
	}
	return some, needLabels
}

func (e entry) follows(kind notification.SourceKind) bool {
	if kind == notification.KindHelmOp {
		return e.helmOps
	}
	return e.gitRepos
}

// selecting is the Notifications of ns that follow kind and select a
// source with labels l.
func (x *index) selecting(kind notification.SourceKind, ns string, l labels.Set) []ctrl.Request {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []ctrl.Request
	for name, e := range x.byNS[ns] {
		if e.follows(kind) && e.selector != nil && (e.everything || e.selector.Matches(l)) {
			out = append(out, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: name}})
		}
	}
	return out
}

// usingSecret is the Notifications of ns whose destination's Secret is
// name.
func (x *index) usingSecret(ns, name string) []ctrl.Request {
	x.mu.RLock()
	defer x.mu.RUnlock()
	var out []ctrl.Request
	for n, e := range x.byNS[ns] {
		if e.secret == name {
			out = append(out, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: ns, Name: n}})
		}
	}
	return out
}

// feed keeps x in step with the Notifications of c.
func (x *index) feed(ctx context.Context, c cache.Cache) error {
	inf, err := c.GetInformer(ctx, &notification.Notification{})
	if err != nil {
		return err
	}
	_, err = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc: func(o any) {
			if n, ok := o.(*notification.Notification); ok {
				x.set(n)
			}
		},
		UpdateFunc: func(_, o any) {
			if n, ok := o.(*notification.Notification); ok {
				x.set(n)
			}
		},
		DeleteFunc: func(o any) {
			if t, ok := o.(toolscache.DeletedFinalStateUnknown); ok {
				o = t.Obj
			}
			if n, ok := o.(*notification.Notification); ok {
				x.remove(n.Namespace, n.Name)
			}
		},
	})
	return err
}
