// Package memlimit gives the Go runtime a soft memory limit below the memory
// limit of the container it runs in, as the agent's install does with
// GOMEMLIMIT (agentinstall.GoMemLimit): near the limit the runtime collects
// harder instead of letting the heap grow to twice what is live, which the
// kernel would answer by killing the process. The manager calls it as it
// starts, so that every way of installing it (the Helm chart, the
// kustomize manifests, `fleet install controller`) gets it from the
// container's limit alone.
package memlimit

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime/debug"
	"strconv"
	"strings"
)

// Ratio is the share of the container's limit given to the Go runtime; the
// rest is for what is not Go heap (the binary's pages, stacks, buffers).
const Ratio = 0.8

// unlimited is where cgroup v1 reports "no limit": the largest page-aligned
// int64, or close to it.
const unlimited = int64(1) << 60

// Limit is the memory limit of the cgroup described by procCgroup (the
// contents of /proc/self/cgroup) under root (normally /sys/fs/cgroup):
// the smallest of cgroup v2's memory.max, or v1's memory.limit_in_bytes,
// of the process's own cgroup and of every cgroup above it up to root, since
// a limit may be set on the pod rather than on the container, and neither
// version shows a parent's limit in the child's file. root is the
// container's own cgroup when the container has a cgroup namespace, and
// the host's hierarchy when it has none (then the process's path leads to
// its cgroup; where that path is not mounted, root alone is read). ok is
// false when no limit is set anywhere on the way.
func Limit(root string, procCgroup []byte) (limit int64, ok bool, err error) {
	for _, f := range candidates(procCgroup) {
		for dir := f.dir; ; dir = filepath.Dir(dir) {
			p := filepath.Join(root, f.hierarchy, dir, f.file)
			data, err := os.ReadFile(p) //nolint:gosec // G304: a memory limit file of the cgroup fs below root, named by /proc/self/cgroup
			switch {
			case errors.Is(err, fs.ErrNotExist):
			case err != nil:
				return 0, false, err
			default:
				v, set, err := parse(data)
				if err != nil {
					return 0, false, fmt.Errorf("%s: %w", p, err)
				}
				if set && (!ok || v < limit) {
					limit, ok = v, true
				}
			}
			if dir == "/" || dir == "." {
				break
			}
		}
	}
	return limit, ok, nil
}

// parse reads one limit file: set is false for "max" (v2) and for v1's
// "unlimited", a number near the largest int64.
func parse(data []byte) (v int64, set bool, err error) {
	s := strings.TrimSpace(string(data))
	if s == "max" {
		return 0, false, nil
	}
	v, err = strconv.ParseInt(s, 10, 64)
	if err != nil {
		return 0, false, err
	}
	return v, v > 0 && v < unlimited, nil
}

// limitFile is where a limit may be: file in the cgroup at dir, and in each
// cgroup above it, of the hierarchy mounted at root/hierarchy.
type limitFile struct{ hierarchy, dir, file string }

// candidates are the files that may hold the limit: those of the process's
// own cgroups as /proc/self/cgroup names them (v2's, and v1's memory
// controller; in hybrid mode both, and the smallest wins), and root's own
// when it names none.
func candidates(procCgroup []byte) []limitFile {
	var out []limitFile
	sc := bufio.NewScanner(bytes.NewReader(procCgroup))
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		dir := filepath.Clean("/" + parts[2])
		switch {
		case parts[0] == "0" && parts[1] == "":
			out = append(out, limitFile{"", dir, "memory.max"})
		case hasController(parts[1], "memory"):
			out = append(out, limitFile{"memory", dir, "memory.limit_in_bytes"})
		}
	}
	if len(out) == 0 {
		out = []limitFile{{"memory", "/", "memory.limit_in_bytes"}, {"", "/", "memory.max"}}
	}
	return out
}

func hasController(list, name string) bool {
	for _, c := range strings.Split(list, ",") {
		if c == name {
			return true
		}
	}
	return false
}

// Apply sets the runtime's soft memory limit to Ratio of the container's
// limit, unless GOMEMLIMIT is set (the runtime honours it already) or no
// limit is found. It returns the limit set, 0 for none.
func Apply() (int64, error) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0, nil
	}
	self, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return 0, nil //nolint:nilerr // not Linux, or no /proc: nothing to follow
	}
	limit, ok, err := Limit("/sys/fs/cgroup", self)
	if err != nil || !ok {
		return 0, err
	}
	soft := int64(float64(limit) * Ratio)
	debug.SetMemoryLimit(soft)
	return soft, nil
}
