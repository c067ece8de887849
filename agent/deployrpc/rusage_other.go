//go:build !linux

package deployrpc

import "os"

// maxRSSKiB is unknown outside Linux.
func maxRSSKiB(*os.ProcessState) int64 { return 0 }
