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

import "sync"

// minGeneration is the fewest strings a generation holds before it is
// retired: below it the pool is small enough to keep whole.
const minGeneration = 4096

// Pool interns strings in two generations. A string is looked up in the
// current generation, then in the previous one (and moved to the current);
// once the current one holds as many strings as the previous one (and at
// least minGeneration), the previous generation is dropped and the current
// one becomes it. So a string no object uses any more (a commit's content
// name) leaves the pool after two generations, and the pool holds at most
// about twice the distinct strings in use. A string in use that was not
// seen for two generations is only copied again. Safe for concurrent use.
type Pool struct {
	mu       sync.Mutex
	current  map[string]string
	previous map[string]string
}

// NewPool returns an empty Pool.
func NewPool() *Pool {
	return &Pool{current: map[string]string{}}
}

// String returns the pool's copy of s, adding s when it has none.
func (p *Pool) String(s string) string {
	if s == "" {
		return s
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.locked(s)
}

// Map returns m with the pool's copies of its keys and values: a new map,
// m is left as it was.
func (p *Pool) Map(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[p.locked(k)] = p.locked(v)
	}
	return out
}

// locked is String with p.mu held.
func (p *Pool) locked(s string) string {
	if s == "" {
		return s
	}
	if v, ok := p.current[s]; ok {
		return v
	}
	if v, ok := p.previous[s]; ok {
		p.current[v] = v
		return v
	}
	p.current[s] = s
	if n := len(p.current); n >= max(minGeneration, len(p.previous)) {
		p.previous, p.current = p.current, make(map[string]string, n)
	}
	return s
}

// Len is the number of strings the pool holds.
func (p *Pool) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.current) + len(p.previous)
}
