package deployrpc

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/gitfleet/fleet/agent/release"
	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// BinaryName is the deploy binary's name.
const BinaryName = "fleet-agent-deploy"

// DefaultConcurrency is how many deploy binaries run at once by default.
// Each one holds Helm's SDK in memory while it runs (docs/scale.md, "Edge
// clusters", has the figures): two bound the agent's peak to its resident
// memory plus two children, while one slow deploy (a Helm wait of minutes)
// does not hold up every other.
const DefaultConcurrency = 2

// binaryRetry is how soon a deploy looks again for a missing binary.
const binaryRetry = time.Minute

// Runner runs fleet-agent-deploy, one process per operation.
type Runner struct {
	// Binary is the deploy binary: a path, or a name looked up beside the
	// running executable, then in $PATH (default BinaryName).
	Binary string
	// Config reaches the agent's own cluster.
	Config *rest.Config
	// ClusterNamespace, SystemNamespace and NamespaceMissingRetry are
	// handed to each Request.
	ClusterNamespace, SystemNamespace string
	NamespaceMissingRetry             time.Duration
	// Concurrency bounds the children running at once (default
	// DefaultConcurrency).
	Concurrency int
	// Timeout bounds each run, from the moment it has a slot: past it the
	// child's process group is killed and the run fails with
	// fleet.ReasonDeployTimedOut (default DefaultTimeout).
	Timeout time.Duration
	// MemoryLimit bounds the memory each child maps, in bytes (see
	// LimitMemory): one that needs more fails with
	// fleet.ReasonDeployOutOfMemory (default DefaultMemoryLimit).
	MemoryLimit int64
	// ChartCacheDir is handed to each Request: where the children keep the
	// charts they download (empty: none are kept).
	ChartCacheDir string

	once sync.Once
	sem  chan struct{}
}

// Deploy installs or upgrades the release of a BundleDeployment.
func (r *Runner) Deploy(ctx context.Context, d Deploy) error {
	return r.Run(ctx, &Request{Op: OpDeploy, Deploy: &d})
}

// Uninstall removes a release whose BundleDeployment is gone.
func (r *Runner) Uninstall(ctx context.Context, rel *release.Release) error {
	return r.Run(ctx, &Request{Op: OpUninstall, Uninstall: &release.Release{
		Name: rel.Name, Namespace: rel.Namespace, Version: rel.Version, Chart: rel.Chart}})
}

// Find resolves the deploy binary: a path is taken as it is; a name is
// looked for beside the running executable, then in $PATH. The error names
// the flag that sets it.
func Find(binary string) (string, error) {
	if binary == "" {
		binary = BinaryName
	}
	if strings.ContainsRune(binary, filepath.Separator) {
		if _, err := os.Stat(binary); err != nil {
			return "", outcome.Waitf(fleet.ReasonDeployBinaryMissing, binaryRetry,
				"the deploy binary %s cannot be run (%v): install it there or set the agent's --deploy-binary flag", binary, err)
		}
		return binary, nil
	}
	var beside string
	if self, err := os.Executable(); err == nil {
		beside = filepath.Join(filepath.Dir(self), binary)
		if _, err := os.Stat(beside); err == nil {
			return beside, nil
		}
	}
	if p, err := exec.LookPath(binary); err == nil {
		return p, nil
	}
	return "", outcome.Waitf(fleet.ReasonDeployBinaryMissing, binaryRetry,
		"the deploy binary %s is neither beside the agent (%s) nor in $PATH: install it, or set the agent's --deploy-binary flag to its path",
		binary, beside)
}

// ReleaseKey is the key the forwarded log lines name the release by.
const ReleaseKey = "release"

// Run runs one Request in a child process and returns its error. The
// child's log lines go to ctx's logger, which Run has name the request's
// release (ReleaseKey): ctx's logger should not carry that key already.
// Cancelling ctx kills the child. A child that meets its Timeout or
// MemoryLimit is stopped, and the error says which bound it met (IsBound):
// its slot goes to the next run.
func (r *Runner) Run(ctx context.Context, req *Request) error {
	bin, err := Find(r.Binary)
	if err != nil {
		return err
	}
	conn, err := ConnectionOf(r.Config)
	if err != nil {
		return outcome.Stall(fleet.ReasonError, err)
	}
	req.Version, req.Connection = Version, conn
	req.ClusterNamespace, req.SystemNamespace, req.NamespaceMissingRetry = r.ClusterNamespace, r.SystemNamespace, r.NamespaceMissingRetry
	req.MemoryLimit, req.ChartCacheDir = r.memoryLimit(), r.ChartCacheDir
	in, err := json.Marshal(req)
	if err != nil {
		return err
	}
	if err := r.acquire(ctx); err != nil {
		return err
	}
	defer r.release()
	// Every line of the child is about this release: named once, here.
	carried := map[string]string{ReleaseKey: req.release().String()}
	log := ctrl.LoggerFrom(ctx).WithValues(ReleaseKey, carried[ReleaseKey])
	runCtx, cancel := context.WithTimeout(ctx, r.timeout())
	defer cancel()
	cmd := exec.CommandContext(runCtx, bin) //nolint:gosec // G204: the project's own deploy binary, from the agent's --deploy-binary flag or beside the agent
	isolate(cmd)
	// A grandchild keeping the output open does not hold the slot.
	cmd.WaitDelay = killWait
	cmd.Stdin = bytes.NewReader(in)
	var out bytes.Buffer
	cmd.Stdout = &out
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	started := time.Now()
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting %s: %w", bin, err)
	}
	tail := forwardLog(log, carried, stderr)
	waitErr := cmd.Wait()
	child := <-tail
	// Its duration and peak memory: what a deploy costs on top of the
	// resident agent.
	log.Info("Deploy binary ended", "op", req.Op, "seconds", time.Since(started).Round(time.Millisecond).Seconds(),
		"maxRSSKiB", maxRSSKiB(cmd.ProcessState))
	if ctx.Err() != nil {
		return fmt.Errorf("%s %s stopped: %w", BinaryName, req.Op, ctx.Err())
	}
	resp := &Response{}
	if err := json.Unmarshal(out.Bytes(), resp); err == nil && resp.Version == Version {
		return resp.Error.Err()
	}
	if err := r.boundMet(runCtx, req, cmd.ProcessState, child.outOfMemory); err != nil {
		return err
	}
	if waitErr == nil {
		waitErr = fmt.Errorf("no response of protocol version %d on its output", Version)
	}
	return fmt.Errorf("%s %s failed: %v%s", BinaryName, req.Op, waitErr, child.tail)
}

// boundMet is the error of a child that ended without a response because
// it met a bound: its time ran out (runCtx), the Go runtime could not map
// more memory (outOfMemory), or the system killed it, as the kernel does
// when the container's memory limit is reached. nil otherwise.
func (r *Runner) boundMet(runCtx context.Context, req *Request, ps *os.ProcessState, oom bool) error {
	switch sig := killedBy(ps); {
	case runCtx.Err() != nil:
		return timedOut(req, r.timeout())
	case oom:
		return outOfMemory(req, r.memoryLimit(), r.timeout(), "the Go runtime could not map more")
	case sig == syscall.SIGKILL.String():
		return outOfMemory(req, r.memoryLimit(), r.timeout(),
			"it was killed (SIGKILL), as the kernel does when the agent container's memory limit is reached")
	}
	return nil
}

func (r *Runner) timeout() time.Duration {
	if r.Timeout <= 0 {
		return DefaultTimeout
	}
	return r.Timeout
}

func (r *Runner) memoryLimit() int64 {
	if r.MemoryLimit <= 0 {
		return DefaultMemoryLimit
	}
	return r.MemoryLimit
}

func (r *Runner) acquire(ctx context.Context) error {
	r.once.Do(func() {
		n := r.Concurrency
		if n <= 0 {
			n = DefaultConcurrency
		}
		r.sem = make(chan struct{}, n)
	})
	select {
	case r.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (r *Runner) release() { <-r.sem }

// tailLines is how many of the child's last log lines an error quotes.
const tailLines = 5

// childLog is what an error needs of the child's standard error.
type childLog struct {
	// tail are the last lines, ": "-prefixed ("" for none).
	tail string
	// outOfMemory tells that the Go runtime said it could not map more
	// memory.
	outOfMemory bool
}

// forwardLog logs each line the child writes (zap's JSON, or plain text) as
// the agent's own, and sends the last lines, for an error message, when the
// child's standard error ends. carried are the keys and values log already
// carries (see logLine).
func forwardLog(log logr.Logger, carried map[string]string, r io.Reader) <-chan childLog {
	done := make(chan childLog, 1)
	go func() {
		var last []string
		var res childLog
		sc := bufio.NewScanner(r)
		sc.Buffer(make([]byte, 64*1024), 1024*1024)
		for sc.Scan() {
			line := sc.Text()
			res.outOfMemory = res.outOfMemory || outOfMemoryLine(line)
			msg := logLine(log, carried, line)
			last = append(last, msg)
			if len(last) > tailLines {
				last = last[1:]
			}
		}
		_, _ = io.Copy(io.Discard, r)
		if len(last) > 0 {
			res.tail = ": " + strings.Join(last, "; ")
		}
		done <- res
	}()
	return done
}

// logLine logs one line of the child and returns its message. A key of the
// line that log carries already (carried) is dropped when its value is the
// same, and kept as "child<Key>" otherwise: a log entry with a key twice is
// read differently by every tool.
func logLine(log logr.Logger, carried map[string]string, line string) string {
	var entry map[string]any
	if err := json.Unmarshal([]byte(line), &entry); err != nil {
		log.Info(line)
		return line
	}
	msg, _ := entry["msg"].(string)
	level, _ := entry["level"].(string)
	errText, _ := entry["error"].(string)
	for _, k := range []string{"msg", "level", "ts", "caller", "logger", "error", "stacktrace"} {
		delete(entry, k)
	}
	for k, v := range carried {
		got, ok := entry[k]
		if !ok {
			continue
		}
		delete(entry, k)
		if s, ok := got.(string); !ok || s != v {
			entry["child"+strings.ToUpper(k[:1])+k[1:]] = got
		}
	}
	keys := make([]string, 0, len(entry))
	for k := range entry {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	kv := make([]any, 0, 2*len(keys))
	for _, k := range keys {
		kv = append(kv, k, entry[k])
	}
	if level == "error" {
		log.Error(errors.New(errText), msg, kv...)
		if errText != "" {
			return msg + ": " + errText
		}
		return msg
	}
	log.Info(msg, kv...)
	return msg
}
