package framework

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
)

var binaries struct {
	mu  sync.Mutex
	dir string
	err error
}

// RepoRoot is the project's root directory.
func RepoRoot() string {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		panic("RepoRoot: runtime.Caller(0) has no caller information, so the repository root is unknown")
	}
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Binaries builds every command (fleet, fleet-manager, fleet-agent and
// fleet-agent-deploy, which the agent finds beside itself) once (until
// RemoveBinaries) and returns the directory holding them.
func Binaries() (string, error) {
	binaries.mu.Lock()
	defer binaries.mu.Unlock()
	if binaries.dir != "" || binaries.err != nil {
		return binaries.dir, binaries.err
	}
	dir, err := os.MkdirTemp("", "fleet-bin-")
	if err != nil {
		binaries.err = err
		return "", err
	}
	cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator), "./cmd/...")
	cmd.Dir = RepoRoot()
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(dir)
		binaries.err = fmt.Errorf("go build ./cmd/...: %v\n%s", err, out)
		return "", binaries.err
	}
	binaries.dir = dir
	return dir, nil
}

// RemoveBinaries deletes what Binaries built (about 300 MB); a suite calls it
// when it ends.
// The next Binaries builds them again, so a test run twice in one process
// (go test -count) does not look for binaries that are gone.
func RemoveBinaries() {
	binaries.mu.Lock()
	defer binaries.mu.Unlock()
	if binaries.dir != "" {
		_ = os.RemoveAll(binaries.dir)
	}
	binaries.dir, binaries.err = "", nil
}

// Binary returns the path of one built binary.
func Binary(name string) (string, error) {
	dir, err := Binaries()
	if err != nil {
		return "", err
	}
	return filepath.Join(dir, name), nil
}

// Run runs a built binary to completion and returns its standard output.
func Run(name string, args ...string) ([]byte, error) {
	bin, err := Binary(name)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, args...)
	var stderr []byte
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		stderr = ee.Stderr
	}
	if err != nil {
		return out, fmt.Errorf("%s %v: %v\n%s", name, args, err, stderr)
	}
	return out, nil
}
