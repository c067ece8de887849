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
// cgroup v2's memory.max, or v1's memory.limit_in_bytes. It looks in the
// process's own cgroup first and then at root itself, which is the
// container's cgroup when the container has a cgroup namespace. ok is false
// when no limit is set or none can be read.
func Limit(root string, procCgroup []byte) (limit int64, ok bool, err error) {
	for _, p := range candidates(procCgroup) {
		data, err := os.ReadFile(filepath.Join(root, p))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return 0, false, err
		}
		s := strings.TrimSpace(string(data))
		if s == "max" {
			return 0, false, nil
		}
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, false, fmt.Errorf("%s: %w", filepath.Join(root, p), err)
		}
		if v <= 0 || v >= unlimited {
			return 0, false, nil
		}
		return v, true, nil
	}
	return 0, false, nil
}

// candidates are the files that may hold the limit, relative to the cgroup
// root, most specific first.
func candidates(procCgroup []byte) []string {
	var v2, v1 []string
	sc := bufio.NewScanner(bytes.NewReader(procCgroup))
	for sc.Scan() {
		// hierarchy-ID:controller-list:cgroup-path
		parts := strings.SplitN(sc.Text(), ":", 3)
		if len(parts) != 3 {
			continue
		}
		switch {
		case parts[0] == "0" && parts[1] == "":
			v2 = append(v2, filepath.Join(parts[2], "memory.max"))
		case hasController(parts[1], "memory"):
			v1 = append(v1, filepath.Join("memory", parts[2], "memory.limit_in_bytes"))
		}
	}
	out := append(v1, v2...)
	return append(out, "memory.max", filepath.Join("memory", "memory.limit_in_bytes"))
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
		return 0, nil // not Linux, or no /proc: nothing to follow
	}
	limit, ok, err := Limit("/sys/fs/cgroup", self)
	if err != nil || !ok {
		return 0, err
	}
	soft := int64(float64(limit) * Ratio)
	debug.SetMemoryLimit(soft)
	return soft, nil
}
