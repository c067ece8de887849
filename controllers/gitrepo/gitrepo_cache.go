package gitrepo

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// cacheLockName is the file whose lock says a manager process uses a git
// cache directory.
const cacheLockName = ".lock"

// cacheDir is the git cache directory of this process: dir, locked so that
// no other manager process deletes or rewrites what it holds (the trees
// are deleted when a manager starts), or, when dir is empty, a new
// directory below the system's temporary one, deleted when ctx ends. The
// returned release unlocks it.
func cacheDir(dir string) (string, func(), error) {
	temp := dir == ""
	if temp {
		d, err := os.MkdirTemp("", "fleet-gitrepos-")
		if err != nil {
			return "", nil, fmt.Errorf("making a git cache directory: %w (set --git-cache-dir)", err)
		}
		dir = d
	}
	unlock, err := lockDir(dir)
	if err != nil {
		return "", nil, err
	}
	return dir, func() {
		unlock()
		if temp {
			_ = os.RemoveAll(dir)
		}
	}, nil
}

// lockDir takes an exclusive lock on dir for this process, which holds it
// until release (or its end): a second manager given the same directory
// fails at once with what to do, instead of deleting the first one's files.
func lockDir(dir string) (release func(), err error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("making the git cache directory %s: %w", dir, err)
	}
	path := filepath.Join(dir, cacheLockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600) //nolint:gosec // G304: the path is the operator's --git-cache-dir
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		holder := readHolder(f)
		_ = f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("the git cache directory %s is in use by another manager process%s: give each manager its own --git-cache-dir", dir, holder)
		}
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return func() { _ = f.Close() }, nil
}

// readHolder is " (pid N)" when the lock file names the process holding
// it.
func readHolder(f *os.File) string {
	b := make([]byte, 32)
	n, _ := f.ReadAt(b, 0)
	if pid := strings.TrimSpace(string(b[:n])); pid != "" {
		return " (pid " + pid + ")"
	}
	return ""
}

// releaseOnStop is a manager Runnable that calls release when the manager
// stops.
type releaseOnStop func()

func (r releaseOnStop) Start(ctx context.Context) error {
	<-ctx.Done()
	r()
	return nil
}

// NeedLeaderElection is false: a replica that is not the leader holds its
// directory too.
func (releaseOnStop) NeedLeaderElection() bool { return false }
