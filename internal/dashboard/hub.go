package dashboard

import (
	"context"
	"sync"
	"time"
)

// hub counts changes and wakes the pages' event streams, at most once per
// debounce interval however many objects change.
type hub struct {
	mu      sync.Mutex
	version uint64
	dirty   bool
	wake    chan struct{} // closed and replaced at each published version
	poke    chan struct{}
}

func newHub() *hub {
	return &hub{wake: make(chan struct{}), poke: make(chan struct{}, 1)}
}

// changed records that something changed.
func (h *hub) changed() {
	h.mu.Lock()
	h.dirty = true
	h.mu.Unlock()
	select {
	case h.poke <- struct{}{}:
	default:
	}
}

// run publishes a new version after each change, at most once per d.
func (h *hub) run(ctx context.Context, d time.Duration) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-h.poke:
		}
		h.mu.Lock()
		if h.dirty {
			h.dirty = false
			h.version++
			close(h.wake)
			h.wake = make(chan struct{})
		}
		h.mu.Unlock()
		select {
		case <-ctx.Done():
			return
		case <-time.After(d):
		}
	}
}

// current returns the published version and a channel closed at the next.
func (h *hub) current() (uint64, <-chan struct{}) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.version, h.wake
}
