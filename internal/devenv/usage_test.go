package devenv

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The figures come from /proc: this process, kept busy over the window,
// used about a core, has resident memory and an age.
func TestMeasureWorkloads(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	busy, stop := make(chan struct{}), make(chan struct{})
	go func() {
		close(busy)
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
		}
	}()
	<-busy
	self := WorkloadProcess{Cluster: "here", Name: "devenv.test", PID: os.Getpid()}
	gone := WorkloadProcess{Cluster: "here", Name: "gone", PID: 1 << 30}
	before := ownCPU(t)
	usage, err := MeasureWorkloads(ctx, []WorkloadProcess{self, gone}, time.Second)
	used := ownCPU(t) - before
	close(stop)
	if err != nil {
		t.Fatal(err)
	}
	if len(usage) != 1 || usage[0].PID != self.PID {
		t.Fatalf("want this process alone (the other does not exist), got %+v", usage)
	}
	u := usage[0]
	// A busy goroutine on a machine shared with others gets what the
	// others leave it: some CPU over the window, and no more than the
	// process used, as the kernel counts it, from before the measure to
	// after it (a clock tick of slack).
	if u.Recent <= 0 || time.Duration(u.Recent*float64(time.Second)) > used+20*time.Millisecond {
		t.Errorf("recent cores %.2f over a second; the process used %s", u.Recent, used)
	}
	if u.CPU <= 0 || u.Age <= 0 || u.CPU > 64*u.Age {
		t.Errorf("cpu %s over %s", u.CPU, u.Age)
	}
	if u.RSS < 1<<20 {
		t.Errorf("rss %d bytes", u.RSS)
	}
	var out strings.Builder
	if err := PrintUsage(&out, usage, time.Second); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "devenv.test") || !strings.Contains(out.String(), "total") {
		t.Errorf("table:\n%s", out.String())
	}
}

// Without workloads the examples' workloads directory is left out; with
// them every directory is a path.
func TestExamplePaths(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"plain", "helm", WorkloadsDir, ".git"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("#"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		workloads bool
		want      string
	}{{false, "helm,plain"}, {true, "helm,plain,workloads"}} {
		e := &Env{opts: Options{Examples: dir, Workloads: tc.workloads}}
		paths, err := e.examplePaths()
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(paths, ","); got != tc.want {
			t.Errorf("workloads=%v: paths %s, want %s", tc.workloads, got, tc.want)
		}
	}
	e := &Env{opts: Options{Examples: t.TempDir()}}
	if _, err := e.examplePaths(); err == nil || !strings.Contains(err.Error(), "no example directories") {
		t.Errorf("an empty examples directory: %v", err)
	}
}

// ownCPU is the CPU time this process used so far, user and system.
func ownCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
