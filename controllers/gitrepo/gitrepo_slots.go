package gitrepo

import (
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"
)

// slotWaiters are the GitRepos that found their namespace's git fetch slots
// busy, by namespace, in order: each slot given back wakes the first of
// them at once, instead of leaving it to its retry a second or two later.
// A commit that wakes a hundred GitRepos of one namespace reaches them as
// fast as its two slots allow. The zero value is ready to use.
type slotWaiters struct {
	mu      sync.Mutex
	waiting map[string][]client.ObjectKey
	queued  map[client.ObjectKey]bool
}

// wait puts key in line for a slot of its namespace, unless it is already.
func (w *slotWaiters) wait(key client.ObjectKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.queued[key] {
		return
	}
	if w.waiting == nil {
		w.waiting, w.queued = map[string][]client.ObjectKey{}, map[client.ObjectKey]bool{}
	}
	w.queued[key] = true
	w.waiting[key.Namespace] = append(w.waiting[key.Namespace], key)
}

// taken takes key out of line: it has a slot.
func (w *slotWaiters) taken(key client.ObjectKey) {
	w.mu.Lock()
	defer w.mu.Unlock()
	delete(w.queued, key)
}

// next returns the first GitRepo of namespace ns still waiting for a slot,
// and takes it out of line.
func (w *slotWaiters) next(ns string) (client.ObjectKey, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	line := w.waiting[ns]
	for len(line) > 0 {
		key := line[0]
		line = line[1:]
		if w.queued[key] {
			delete(w.queued, key)
			w.setLine(ns, line)
			return key, true
		}
	}
	w.setLine(ns, line)
	return client.ObjectKey{}, false
}

func (w *slotWaiters) setLine(ns string, line []client.ObjectKey) {
	if len(line) == 0 {
		delete(w.waiting, ns)
		return
	}
	w.waiting[ns] = line
}
