package agent

import (
	"context"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"time"
)

// SampleHeap turns the Go runtime's heap profiling off unless on, that is
// unless the agent serves its profiles (--debug-bind-address): nobody could
// read the samples otherwise. A sample records the stack of an allocation,
// one in every 512 KiB allocated; unwinding those stacks reads the binary's
// function tables (.gopclntab) wherever the agent allocates, and those pages
// stay resident: 2 MB of the agent's RSS with 10 bundles. GODEBUG's
// memprofilerate, when set, wins. Called at the start of the command, before
// the agent's work allocates.
func SampleHeap(on bool) {
	if on || strings.Contains(os.Getenv("GODEBUG"), "memprofilerate=") {
		return
	}
	runtime.MemProfileRate = 0
}

// What counts as a burst of work, and as idle, for returnMemoryWhenIdle.
const (
	idleCheckEvery = 10 * time.Second
	// idleAllocBytes: an idle agent (check-ins, watch bookmarks) allocates
	// far less than this in idleCheckEvery.
	idleAllocBytes = 1 << 20
	// burstAllocBytes: a burst smaller than this leaves little to return.
	burstAllocBytes = 4 << 20
)

// returnMemoryWhenIdle gives the memory a burst of work used (deploys render
// charts and manifests and build releases, all garbage once stored) back to
// the system as soon as the agent is idle again. Left to itself the Go
// runtime collects an idle process only every two minutes and returns the
// freed pages slowly, so an agent that deployed a few bundles would hold
// several times its live heap for minutes; on an edge node that memory is
// what is scarce. It costs one collection of a small heap after each burst.
func returnMemoryWhenIdle(ctx context.Context) {
	sample := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	allocated := func() uint64 {
		metrics.Read(sample)
		return sample[0].Value.Uint64()
	}
	last, burst := allocated(), uint64(0)
	t := time.NewTicker(idleCheckEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := allocated()
		d := now - last
		last = now
		if d >= idleAllocBytes {
			burst += d // still working
			continue
		}
		if burst >= burstAllocBytes {
			debug.FreeOSMemory()
		}
		burst = 0
	}
}
