package version

import (
	"runtime/debug"
	"testing"

	. "github.com/onsi/gomega"
)

func TestFromBuildInfo(t *testing.T) {
	cases := []struct {
		name string
		info debug.BuildInfo
		want string
	}{
		{"go install at a version", debug.BuildInfo{Main: debug.Module{Version: "v0.3.0"}}, "v0.3.0"},
		{"checkout with a commit", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "false"}}}, "dev-0123456789ab"},
		{"checkout with changes", debug.BuildInfo{Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}, "dev-0123456789ab-dirty"},
		{"nothing recorded", debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "dev"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			NewWithT(t).Expect(fromBuildInfo(&tc.info)).To(Equal(tc.want))
		})
	}
}

func TestStampedVersionWins(t *testing.T) {
	g := NewWithT(t)
	defer func(v string) { version = v }(version)
	version = "v9.9.9"
	g.Expect(Get()).To(Equal("v9.9.9"))
}
