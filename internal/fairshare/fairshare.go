// Package fairshare bounds how much of a shared pool one namespace holds.
// Controllers that fetch from outside (git, chart repositories) run a fixed
// number of workers; without a share, one tenant's many slow sources would
// hold every worker and stall everyone else's.
package fairshare

import "sync"

// Slots counts the slots each namespace holds. The zero value is ready to
// use; it is safe for concurrent use.
type Slots struct {
	mu   sync.Mutex
	held map[string]int
}

// Share is the most slots one namespace holds of a pool of workers: half of
// them, rounded up, so that another namespace always finds one free.
func Share(workers int) int {
	return (max(workers, 1) + 1) / 2
}

// Take takes a slot for namespace ns unless it already holds limit of them.
// Every Take that returns true is paired with a Release.
func (s *Slots) Take(ns string, limit int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held == nil {
		s.held = map[string]int{}
	}
	if s.held[ns] >= limit {
		return false
	}
	s.held[ns]++
	return true
}

// Release gives back a slot of namespace ns.
func (s *Slots) Release(ns string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[ns]--; s.held[ns] <= 0 {
		delete(s.held, ns)
	}
}

// Held is how many slots namespace ns holds.
func (s *Slots) Held(ns string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held[ns]
}
