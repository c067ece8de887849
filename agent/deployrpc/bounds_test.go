//go:build linux

// The bounds are set on Linux only (a process group killed whole, an
// address-space limit): see process_linux.go and process_other.go.

package deployrpc

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	"k8s.io/client-go/rest"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// boundedChild, in the environment, makes this test binary the child of
// TestMemoryBound: it bounds itself, then allocates as its value says.
const boundedChild = "DEPLOYRPC_TEST_BOUNDED_CHILD"

// childScript writes a stand-in for the deploy binary.
func childScript(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), BinaryName)
	if err := os.WriteFile(path, []byte("#!/bin/sh\ncat >/dev/null\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

func boundRunner(bin string) *Runner {
	return &Runner{Binary: bin, Config: &rest.Config{Host: "https://127.0.0.1:1"}, Timeout: 500 * time.Millisecond, MemoryLimit: 64 << 20}
}

func deployRequest() *Request {
	return &Request{Op: OpDeploy, Deploy: &Deploy{Name: "loop", Options: fleet.BundleDeploymentOptions{DefaultNamespace: "apps"}}}
}

// A child past its time is killed with everything it started, and the
// error names the bound and how to raise it.
func TestTimeBound(t *testing.T) {
	g := NewWithT(t)
	pidFile := filepath.Join(t.TempDir(), "grandchild")
	bin := childScript(t, "sleep 300 &\necho $! >"+pidFile+"\nwait\n")
	started := time.Now()
	err := boundRunner(bin).Run(t.Context(), deployRequest())
	g.Expect(time.Since(started)).To(BeNumerically("<", 10*time.Second), "the run ends at its bound")
	g.Expect(IsBound(err)).To(BeTrue(), "%v", err)
	g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonDeployTimedOut))
	g.Expect(err).To(MatchError(And(ContainSubstring("apps/loop"), ContainSubstring("500ms"),
		ContainSubstring("--deploy-timeout"), ContainSubstring(TimeoutEnv))))
	var w *outcome.Waiting
	g.Expect(errors.As(err, &w)).To(BeTrue())
	g.Expect(w.After).To(Equal(minBoundRetry), "retried no sooner than a minute")

	data, err := os.ReadFile(pidFile)
	g.Expect(err).NotTo(HaveOccurred())
	pid, err := strconv.Atoi(strings.TrimSpace(string(data)))
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func() bool { return running(pid) }).WithTimeout(5*time.Second).Should(BeFalse(), "the grandchild is killed too")
}

// running tells whether pid runs (a zombie does not).
func running(pid int) bool {
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// A child that says it ran out of memory, or that the system killed, met
// its memory bound; one that failed otherwise did not.
func TestMemoryBoundReported(t *testing.T) {
	for name, tc := range map[string]struct {
		body, how string
	}{
		"runtime": {"echo 'runtime: out of memory: cannot allocate 1073741824-byte block (268435456 in use)' >&2\n" +
			"echo 'fatal error: out of memory' >&2\nfor i in 1 2 3 4 5 6 7 8; do echo \"goroutine frame $i\" >&2; done\nexit 2\n",
			"could not map more"},
		"killed": {"kill -9 $$\n", "SIGKILL"},
	} {
		t.Run(name, func(t *testing.T) {
			g := NewWithT(t)
			err := boundRunner(childScript(t, tc.body)).Run(t.Context(), deployRequest())
			g.Expect(outcome.ReasonOf(err, "")).To(Equal(fleet.ReasonDeployOutOfMemory), "%v", err)
			g.Expect(err).To(MatchError(And(ContainSubstring(tc.how), ContainSubstring("64Mi"),
				ContainSubstring("--deploy-memory-limit"), ContainSubstring(MemoryLimitEnv))))
		})
	}
	g := NewWithT(t)
	err := boundRunner(childScript(t, "echo 'panic: nil map' >&2\nexit 2\n")).Run(t.Context(), deployRequest())
	g.Expect(IsBound(err)).To(BeFalse())
	g.Expect(err).To(MatchError(ContainSubstring("panic: nil map")))
}

// LimitMemory holds whatever the process allocates: past the bound the Go
// runtime ends it, saying so; within it, nothing changes.
func TestMemoryBound(t *testing.T) {
	switch os.Getenv(boundedChild) {
	case "":
	case "small":
		boundAndAllocate(16)
		return
	default:
		boundAndAllocate(2048)
		return
	}
	for mode, survives := range map[string]bool{"small": true, "huge": false} {
		g := NewWithT(t)
		cmd := exec.Command(os.Args[0], "-test.run=^TestMemoryBound$", "-test.count=1")
		cmd.Env = append(os.Environ(), boundedChild+"="+mode)
		out, err := cmd.CombinedOutput()
		if survives {
			g.Expect(err).NotTo(HaveOccurred(), "%s", out)
			g.Expect(string(out)).To(ContainSubstring("allocated 16 MiB"))
			continue
		}
		g.Expect(err).To(HaveOccurred(), "2 GiB cannot be had within 256 MiB")
		g.Expect(string(out)).NotTo(ContainSubstring("allocated 2048 MiB"))
		seen := false
		for _, line := range strings.Split(string(out), "\n") {
			seen = seen || outOfMemoryLine(line)
		}
		g.Expect(seen).To(BeTrue(), "the runtime says it ran out of memory:\n%.2000s", out)
	}
}

// boundAndAllocate bounds this process to 256 MiB and holds mib MiB.
func boundAndAllocate(mib int) {
	if err := LimitMemory(256 << 20); err != nil {
		panic(err)
	}
	var lim syscall.Rlimit
	_ = syscall.Getrlimit(syscall.RLIMIT_DATA, &lim)
	if lim.Max != 256<<20 {
		panic("the hard limit was not lowered")
	}
	held := make([][]byte, 0, mib/16)
	for range mib / 16 {
		b := make([]byte, 16<<20)
		for i := 0; i < len(b); i += 4096 {
			b[i] = 1
		}
		held = append(held, b)
	}
	println("allocated", len(held)*16, "MiB")
}
