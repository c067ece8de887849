package deployer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/gitfleet/fleet/agent/deployrpc"
)

// The chart cache bounds: the charts kept, and their bytes together. A
// chart is some kilobytes to a few megabytes; a cluster runs a handful of
// HelmOps.
const (
	chartCacheMaxFiles = 32
	chartCacheMaxBytes = 128 << 20
)

// chartCache keeps the charts the children download, in a directory of the
// agent's (Request.ChartCacheDir), so that deploying a HelmOp's chart again
// (a drift correction, changed values, an agent restart) does not download
// it again. A version is taken as immutable, as Helm takes it: the same
// repository, chart and version is the same chart. The key holds the
// credentials too, so a chart downloaded with one Secret's credentials is
// never served to a BundleDeployment with other credentials (or none): each
// must be let in by the repository itself.
type chartCache struct {
	dir string
}

// cacheable tells whether src's chart may be kept: only a chart of an
// exact version. One without (a chart URL, "latest") may change at its
// source, and each deploy downloads it again.
func cacheable(src deployrpc.ChartSource) bool {
	return src.Version != ""
}

// ownDir makes the cache directory, and tells whether it is the agent's
// own: a directory (not a link) of this user that nobody else may read or
// write. A directory someone else could write is not used: a chart planted
// there would be deployed.
func (c chartCache) ownDir() bool {
	if err := os.MkdirAll(c.dir, 0o700); err != nil {
		return false
	}
	info, err := os.Lstat(c.dir)
	if err != nil || !info.IsDir() || info.Mode().Perm()&0o077 != 0 {
		return false
	}
	st, ok := info.Sys().(*syscall.Stat_t)
	return !ok || int(st.Uid) == os.Getuid()
}

// key is the file name of src's chart.
func (c chartCache) key(src deployrpc.ChartSource) string {
	src.SecretName = ""           // for messages only: the credentials themselves are in the key
	raw, err := json.Marshal(src) //nolint:gosec // G117: hashed into a file name, never stored or sent
	if err != nil {
		return "" // strings and bytes only: never
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:]) + ".tgz"
}

// get is src's chart, if kept; a chart read is marked as used now.
func (c chartCache) get(src deployrpc.ChartSource) ([]byte, bool) {
	if c.dir == "" || !cacheable(src) || c.key(src) == "" || !c.ownDir() {
		return nil, false
	}
	p := filepath.Join(c.dir, c.key(src))
	tgz, err := os.ReadFile(p) //nolint:gosec // G304: a name the cache made, in its own directory
	if err != nil {
		return nil, false
	}
	now := time.Now()
	_ = os.Chtimes(p, now, now)
	return tgz, true
}

// put keeps src's chart: written whole then renamed, so that a child
// killed while writing, or two children at once, leave no partial chart.
// The cache is an optimisation: errors are dropped, the chart was
// downloaded anyway.
func (c chartCache) put(src deployrpc.ChartSource, tgz []byte) {
	key := c.key(src)
	if c.dir == "" || !cacheable(src) || key == "" || len(tgz) > chartCacheMaxBytes || !c.ownDir() {
		return
	}
	f, err := os.CreateTemp(c.dir, ".partial-*")
	if err != nil {
		return
	}
	_, werr := f.Write(tgz)
	cerr := f.Close()
	if werr != nil || cerr != nil || os.Rename(f.Name(), filepath.Join(c.dir, key)) != nil {
		_ = os.Remove(f.Name())
		return
	}
	c.evict()
}

// drop forgets src's chart (one that no longer loads).
func (c chartCache) drop(src deployrpc.ChartSource) {
	if c.dir != "" {
		_ = os.Remove(filepath.Join(c.dir, c.key(src)))
	}
}

// evict removes the least recently used charts beyond the bounds, and
// partial files left by a child that was killed an hour ago or more.
func (c chartCache) evict() {
	entries, err := os.ReadDir(c.dir)
	if err != nil {
		return
	}
	type kept struct {
		name string
		size int64
		used time.Time
	}
	var charts []kept
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !info.Mode().IsRegular() {
			continue
		}
		if strings.HasPrefix(e.Name(), ".partial-") {
			if time.Since(info.ModTime()) > time.Hour {
				_ = os.Remove(filepath.Join(c.dir, e.Name()))
			}
			continue
		}
		charts = append(charts, kept{e.Name(), info.Size(), info.ModTime()})
	}
	sort.Slice(charts, func(i, j int) bool { return charts[i].used.After(charts[j].used) })
	var total int64
	for i, k := range charts {
		total += k.size
		if i >= chartCacheMaxFiles || total > chartCacheMaxBytes {
			_ = os.Remove(filepath.Join(c.dir, k.name))
		}
	}
}
