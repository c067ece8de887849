package deployrpc

import (
	"os"
	"syscall"
)

// maxRSSKiB is a finished child's peak resident memory.
func maxRSSKiB(ps *os.ProcessState) int64 {
	if ps == nil {
		return 0
	}
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return ru.Maxrss
	}
	return 0
}
