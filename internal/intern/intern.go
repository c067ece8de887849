// Package intern makes equal strings of the objects the manager caches
// share one copy. A BundleDeployment decoded from a watch event holds its
// own copy of every string: label keys and values, its deploymentIDs, its
// condition types and reasons, which are the same across thousands of
// them. At 100,000 BundleDeployments that is about a third of each cached
// object (docs/scale.md, "Manager memory").
//
// A Pool is a cache transform: it changes only which copy of a string an
// object holds, never its value.
package intern

import (
	"sync"
	"time"
)

// The pool's bounds. Strings longer than maxLen are left alone: the ones
// that repeat are short (a deploymentID is 129 bytes), and a long value
// (an annotation, a message an agent writes) must not be pinned here after
// its object changed. A generation is retired after generationAge once it
// holds minGeneration strings, or at once when it holds maxGeneration:
// so the pool holds at most 2*maxGeneration strings of maxLen bytes, about
// 50 MB, whatever is written, and strings no object uses any more leave it
// within two generations.
const (
	maxLen        = 160
	minGeneration = 4096
	maxGeneration = 1 << 17
	generationAge = 10 * time.Minute
)

// Pool interns strings in two generations. A string is looked up in the
// current generation, then in the previous one (and moved to the current
// one); a generation is retired as the bounds above say, when the current
// one becomes the previous one. A string in use is looked up again as the
// objects holding it are decoded again, which keeps it in the current
// generation; one that was not is only copied again. Safe for concurrent
// use.
type Pool struct {
	mu       sync.Mutex
	current  map[string]string
	previous map[string]string
	started  time.Time
	// now is the clock; time.Now unless a test sets it.
	now func() time.Time
}

// NewPool returns an empty Pool.
func NewPool() *Pool {
	return &Pool{current: map[string]string{}, started: time.Now(), now: time.Now}
}

// String returns the pool's copy of s, adding s when it has none.
func (p *Pool) String(s string) string {
	if s == "" || len(s) > maxLen {
		return s
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.locked(s)
}

// Map returns m with the pool's copies of its keys and values: a new map,
// m is left as it was.
func (p *Pool) Map(m map[string]string) map[string]string {
	return p.mapOf(m, true)
}

// Keys returns m with the pool's copies of its keys, its values as they
// are (annotations: their values are often long, and unique).
func (p *Pool) Keys(m map[string]string) map[string]string {
	return p.mapOf(m, false)
}

func (p *Pool) mapOf(m map[string]string, values bool) map[string]string {
	if len(m) == 0 {
		return m
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]string, len(m))
	for k, v := range m {
		if values {
			v = p.locked(v)
		}
		out[p.locked(k)] = v
	}
	return out
}

// locked is String with p.mu held.
func (p *Pool) locked(s string) string {
	if s == "" || len(s) > maxLen {
		return s
	}
	if v, ok := p.current[s]; ok {
		return v
	}
	v, ok := p.previous[s]
	if !ok {
		v = s
	}
	p.current[v] = v
	if n := len(p.current); n >= maxGeneration || (n >= minGeneration && p.now().Sub(p.started) >= generationAge) {
		p.previous, p.current, p.started = p.current, make(map[string]string, n), p.now()
	}
	return v
}

// Len is the number of strings the pool holds.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.current) + len(p.previous)
}
