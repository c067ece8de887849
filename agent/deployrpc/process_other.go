//go:build !linux

package deployrpc

import (
	"os"
	"os/exec"
)

// isolate leaves cmd as it is outside Linux: cancelling its run kills the
// child alone.
func isolate(*exec.Cmd) {}

// killedBy is unknown outside Linux.
func killedBy(*os.ProcessState) string { return "" }

// LimitMemory sets no bound outside Linux; the time bound still holds.
func LimitMemory(int64) error { return nil }
