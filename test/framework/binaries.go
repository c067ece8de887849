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
	once sync.Once
	dir  string
	err  error
}

// RepoRoot is the project's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Binaries builds fleet, fleet-manager and fleet-agent once per test process
// and returns the directory holding them.
func Binaries() (string, error) {
	binaries.once.Do(func() {
		dir, err := os.MkdirTemp("", "fleet-bin-")
		if err != nil {
			binaries.err = err
			return
		}
		cmd := exec.Command("go", "build", "-o", dir+string(os.PathSeparator), "./cmd/...")
		cmd.Dir = RepoRoot()
		if out, err := cmd.CombinedOutput(); err != nil {
			binaries.err = fmt.Errorf("go build ./cmd/...: %v\n%s", err, out)
			return
		}
		binaries.dir = dir
	})
	return binaries.dir, binaries.err
}

// RemoveBinaries deletes what Binaries built (about 300 MB); a suite calls it
// when it ends.
func RemoveBinaries() {
	if binaries.dir != "" {
		_ = os.RemoveAll(binaries.dir)
	}
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
