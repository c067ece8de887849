package localcluster

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Process is a long-running binary with its output in a log file.
type Process struct {
	Name string
	Log  string
	cmd  *exec.Cmd
	done chan struct{}
}

func start(dir, logName string, attr *syscall.SysProcAttr, path string, env []string, args ...string) (*Process, error) {
	logPath := filepath.Join(dir, logName+".log")
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600) //nolint:gosec // G304: a log in the directory the caller passed.
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...) //nolint:gosec,noctx // G204: the binary the caller passed (the project's own or a control plane's); noctx: a long-running process that Stop and Kill end, not a context.
	cmd.Stdout, cmd.Stderr = f, f
	cmd.SysProcAttr = attr
	if env != nil {
		cmd.Env = append(os.Environ(), env...)
	}
	if err := cmd.Start(); err != nil {
		_ = f.Close() // nothing was written to it: the start error is what matters.
		return nil, err
	}
	p := &Process{Name: logName, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		_ = f.Close() // the process wrote through its own descriptor; this one only lets go of the file.
		close(p.done)
	}()
	return p, nil
}

// Stop asks the process to end (SIGTERM) and kills it after 10 seconds.
func (p *Process) Stop() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		p.Kill()
	}
}

// Kill ends the process at once, as a crash would.
func (p *Process) Kill() {
	if p == nil {
		return
	}
	_ = p.cmd.Process.Kill()
	<-p.done
}

// Exited tells whether the process has ended.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Output returns what the process logged so far.
func (p *Process) Output() string {
	b, _ := os.ReadFile(p.Log)
	return string(bytes.ToValidUTF8(b, []byte("?")))
}

// Tail returns the last n bytes the process logged, for failure messages
// (all of it when shorter; nothing for a nil process).
func (p *Process) Tail(n int) string {
	if p == nil {
		return ""
	}
	out := p.Output()
	if len(out) > n {
		out = out[len(out)-n:]
	}
	return out
}

// StartFile runs the binary at path in the background, logging to
// dir/logName.log (appended to), and kills it when this process dies. env is
// added to this process's environment.
func StartFile(dir, logName, path string, env []string, args ...string) (*Process, error) {
	return start(dir, logName, &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}, path, env, args...)
}

// PID is the process ID.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// StartPath runs the binary at path in the background, in a session of its
// own so it outlives this process (the local environment's `fleet dev up`
// exits and leaves it running); Stop or Kill end it.
func StartPath(dir, logName, path string, args ...string) (*Process, error) {
	return start(dir, logName, &syscall.SysProcAttr{Setsid: true}, path, nil, args...)
}
