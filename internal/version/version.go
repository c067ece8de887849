// Package version tells which build of fleet is running. `make build` and
// `make images` stamp the version with -ldflags
// "-X github.com/gitfleet/fleet/internal/version.version=v0.1.0"; a build
// without it (go build, go install, go run) reports what the Go toolchain
// recorded: the module version for `go install ...@v0.1.0`, else the commit.
package version

import (
	"runtime/debug"
)

// version is set at link time by the Makefile.
var version string

// Get returns the version of this build: the stamped version, else the
// module version, else the VCS commit (with "-dirty" when the tree had
// changes), else "dev".
func Get() string {
	if version != "" {
		return version
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	return fromBuildInfo(info)
}

func fromBuildInfo(info *debug.BuildInfo) string {
	if v := info.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	var rev string
	var dirty bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return "dev-" + rev
}
