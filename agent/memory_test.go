package agent

import (
	"runtime"
	"testing"
)

func TestSampleHeap(t *testing.T) {
	saved := runtime.MemProfileRate
	t.Cleanup(func() { runtime.MemProfileRate = saved })
	for _, c := range []struct {
		name    string
		on      bool
		godebug string
		want    int
	}{
		{"profiles served", true, "", 512 * 1024},
		{"no debug endpoint", false, "", 0},
		{"GODEBUG says otherwise", false, "gctrace=0,memprofilerate=1", 512 * 1024},
	} {
		t.Run(c.name, func(t *testing.T) {
			runtime.MemProfileRate = 512 * 1024
			t.Setenv("GODEBUG", c.godebug)
			SampleHeap(c.on)
			if runtime.MemProfileRate != c.want {
				t.Fatalf("MemProfileRate = %d, want %d", runtime.MemProfileRate, c.want)
			}
		})
	}
}
