package deployrpc

import (
	"os"
	"os/exec"
	"runtime/debug"
	"syscall"

	"github.com/gitfleet/fleet/internal/memlimit"
)

// isolate makes cmd a process group of its own, killed whole when its run
// ends early (what the child started, a credential plugin say, goes with
// it), and killed when the agent dies: a child looping in a template must
// not outlive the agent that bounds it.
func isolate(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}

// killedBy is the signal that ended a child, "" when it exited.
func killedBy(ps *os.ProcessState) string {
	if ps == nil {
		return ""
	}
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return ws.Signal().String()
	}
	return ""
}

// LimitMemory bounds the running process, fleet-agent-deploy, to limit
// bytes of mapped memory (RLIMIT_DATA: its heap, stacks and buffers, not its
// binary's pages): past it the Go runtime cannot map more and ends the
// process with "fatal error: out of memory", whatever a template does. The
// garbage collector works harder from memlimit.Ratio of it on, so a chart
// that makes much garbage but holds little stays within it. The process
// also offers itself first to the kernel's OOM killer (oom_score_adj), so
// that a container limit met before the bound ends the deploy, not the
// agent. The hard limit is lowered too: nothing the process runs later can
// raise it again. A limit of 0 or less sets nothing.
func LimitMemory(limit int64) error {
	if limit <= 0 {
		return nil
	}
	debug.SetMemoryLimit(int64(float64(limit) * memlimit.Ratio))
	// Raising one's own score needs no privilege; where /proc is not
	// writable, the bound below still holds.
	_ = os.WriteFile("/proc/self/oom_score_adj", []byte("1000"), 0)
	var cur syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_DATA, &cur); err != nil {
		return err
	}
	lim := uint64(limit)
	if cur.Max < lim {
		lim = cur.Max
	}
	return syscall.Setrlimit(syscall.RLIMIT_DATA, &syscall.Rlimit{Cur: lim, Max: lim})
}
