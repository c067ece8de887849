package gitfetch

import (
	"errors"
	"fmt"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/outcome"
)

// Limits bound what one fetch and one checkout may cost: whoever controls a
// repository chooses what it holds, and a few MiB of compressed zeros
// inflate to GiBs. Each limit stops the work as the pack streams in or before
// a file is written, never after. Zero fields take the Default* values.
type Limits struct {
	// PackBytes is the most bytes one fetch may receive (the compressed
	// pack as it comes over the wire).
	PackBytes int64
	// Objects is the most objects one fetch may bring, and the most files
	// and directories one checkout may write.
	Objects int64
	// FileBytes is the largest object of a fetch, uncompressed: a file, a
	// directory listing or a commit.
	FileBytes int64
	// CommitBytes is the most bytes, uncompressed, of all the objects of one
	// fetch, and of all the files of one checkout.
	CommitBytes int64
	// PathDepth is the most directories a file's path may cross.
	PathDepth int
	// PathLength is the longest file path, in bytes.
	PathLength int
}

// Default limits: far above a GitOps repository (whose bundles hold at most
// 1.5 MiB of resources each), far below the manager's memory.
const (
	DefaultMaxPackBytes   = 128 << 20
	DefaultMaxObjects     = 100_000
	DefaultMaxFileBytes   = 16 << 20
	DefaultMaxCommitBytes = 256 << 20
	DefaultMaxPathDepth   = 32
	DefaultMaxPathLength  = 1024
)

// withDefaults fills the zero fields of l.
func (l Limits) withDefaults() Limits {
	l.PackBytes = orDefault64(l.PackBytes, DefaultMaxPackBytes)
	l.Objects = orDefault64(l.Objects, DefaultMaxObjects)
	l.FileBytes = orDefault64(l.FileBytes, DefaultMaxFileBytes)
	l.CommitBytes = orDefault64(l.CommitBytes, DefaultMaxCommitBytes)
	l.PathDepth = int(orDefault64(int64(l.PathDepth), DefaultMaxPathDepth))
	l.PathLength = int(orDefault64(int64(l.PathLength), DefaultMaxPathLength))
	return l
}

func orDefault64(n, def int64) int64 {
	if n > 0 {
		return n
	}
	return def
}

// The limits a LimitError names, each with the manager flag that raises it.
const (
	limitPackBytes   = "pack size"
	limitObjects     = "object count"
	limitFileBytes   = "file size"
	limitCommitBytes = "total size"
	limitPathDepth   = "path depth"
	limitPathLength  = "path length"
)

var limitFlags = map[string]string{
	limitPackBytes:   "--git-max-pack-bytes",
	limitObjects:     "--git-max-objects",
	limitFileBytes:   "--git-max-file-bytes",
	limitCommitBytes: "--git-max-commit-bytes",
	limitPathDepth:   "--git-max-path-depth",
	limitPathLength:  "--git-max-path-length",
}

// LimitError says that a fetch or checkout went past one of its Limits.
type LimitError struct {
	// Limit is what was exceeded, e.g. "file size".
	Limit string
	// Flag is the manager flag that raises it.
	Flag string
	// Max is the limit and Got what was found (or reached when the work
	// stopped).
	Max, Got int64
	// Path is the file concerned, when known.
	Path string
}

func (e *LimitError) Error() string {
	what := ""
	switch e.Limit {
	case limitPackBytes:
		what = fmt.Sprintf("the fetch received more than %s", size(e.Max))
	case limitObjects:
		what = fmt.Sprintf("it holds %d objects, files or directories, more than %d", e.Got, e.Max)
	case limitFileBytes:
		what = fmt.Sprintf("%s is %s, more than %s", e.subject("an object"), size(e.Got), size(e.Max))
	case limitCommitBytes:
		what = fmt.Sprintf("its files add up to more than %s (reached at %s)", size(e.Max), e.subject("an object"))
	case limitPathDepth:
		what = fmt.Sprintf("%s is %d directories deep, more than %d", e.subject("a path"), e.Got, e.Max)
	case limitPathLength:
		what = fmt.Sprintf("%s is %d bytes long, more than %d", e.subject("a path"), e.Got, e.Max)
	}
	return fmt.Sprintf("git %s limit exceeded: %s", e.Limit, what)
}

func (e *LimitError) subject(unknown string) string {
	if e.Path == "" {
		return unknown
	}
	return "file " + e.Path
}

func overLimit(limit string, maxAllowed, got int64, path string) *LimitError {
	return &LimitError{Limit: limit, Flag: limitFlags[limit], Max: maxAllowed, Got: got, Path: path}
}

// stallOnLimit turns a LimitError in err into a Stalling error that names the
// repository, the commit and what to do; other errors pass unchanged.
func stallOnLimit(url, commit string, err error) error {
	var le *LimitError
	if !errors.As(err, &le) {
		return err
	}
	return outcome.Stallf(fleet.ReasonGitLimitExceeded,
		"commit %s of %s was refused: %w: remove or shrink it in the repository, or ask an admin to raise the manager's %s",
		shortSHA(commit), url, le, le.Flag)
}

func size(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

func shortSHA(s string) string {
	if len(s) > 7 {
		return s[:7]
	}
	return s
}
