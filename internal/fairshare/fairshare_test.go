package fairshare

import (
	"sync"
	"testing"
)

func TestShare(t *testing.T) {
	for workers, want := range map[int]int{0: 1, 1: 1, 2: 1, 3: 2, 4: 2, 8: 4} {
		if got := Share(workers); got != want {
			t.Errorf("Share(%d) = %d, want %d", workers, got, want)
		}
	}
}

func TestSlotsBoundOneNamespaceNotOthers(t *testing.T) {
	var s Slots
	first, second := s.Take("a", 2), s.Take("a", 2)
	if !first || !second {
		t.Fatal("the first two slots of a were refused")
	}
	if s.Take("a", 2) {
		t.Fatal("a took a third slot over its limit of 2")
	}
	if !s.Take("b", 2) {
		t.Fatal("b was refused while a held its share")
	}
	s.Release("a")
	if !s.Take("a", 2) {
		t.Fatal("a was refused after releasing a slot")
	}
	s.Release("a")
	s.Release("a")
	s.Release("b")
	if s.Held("a") != 0 || s.Held("b") != 0 || len(s.held) != 0 {
		t.Fatalf("slots left after every release: %v", s.held)
	}
}

func TestSlotsConcurrent(t *testing.T) {
	var s Slots
	var wg sync.WaitGroup
	var mu sync.Mutex
	taken := 0
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if s.Take("a", 5) {
				mu.Lock()
				taken++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if taken != 5 || s.Held("a") != 5 {
		t.Fatalf("50 concurrent takes with a limit of 5: %d taken, %d held", taken, s.Held("a"))
	}
}
