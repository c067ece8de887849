package memlimit

import (
	"os"
	"path/filepath"
	"testing"
)

func write(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestLimit(t *testing.T) {
	const gi = int64(1) << 30
	cases := []struct {
		name   string
		files  map[string]string
		cgroup string
		want   int64
		ok     bool
	}{
		{name: "v2 with a cgroup namespace", files: map[string]string{"memory.max": "2147483648\n"},
			cgroup: "0::/\n", want: 2 * gi, ok: true},
		{name: "v2 in its own cgroup, without a namespace",
			files:  map[string]string{"memory.max": "max\n", "kubepods/pod1/c1/memory.max": "1073741824\n"},
			cgroup: "0::/kubepods/pod1/c1\n", want: gi, ok: true},
		{name: "v2 without a limit", files: map[string]string{"memory.max": "max\n"}, cgroup: "0::/\n"},
		{name: "v1", files: map[string]string{"memory/kubepods/x/memory.limit_in_bytes": "536870912\n"},
			cgroup: "4:memory:/kubepods/x\n3:cpu,cpuacct:/kubepods/x\n0::/\n", want: gi / 2, ok: true},
		{name: "v1 with memory among others", files: map[string]string{"memory/a/memory.limit_in_bytes": "536870912"},
			cgroup: "4:cpuacct,memory:/a\n", want: gi / 2, ok: true},
		{name: "v1 without a limit", files: map[string]string{"memory/p/memory.limit_in_bytes": "9223372036854771712\n"},
			cgroup: "4:memory:/p\n"},
		{name: "nothing mounted", cgroup: "0::/\n"},
		{name: "v2, in a child of the namespace's root", files: map[string]string{"memory.max": "1073741824\n", "init/memory.max": "max\n"},
			cgroup: "0::/init\n", want: gi, ok: true},
		{name: "v2, the limit on the pod, not the container",
			files:  map[string]string{"kubepods/pod1/memory.max": "1073741824\n", "kubepods/pod1/c1/memory.max": "max\n"},
			cgroup: "0::/kubepods/pod1/c1\n", want: gi, ok: true},
		{name: "v2, the smallest on the way up",
			files:  map[string]string{"kubepods/memory.max": "536870912\n", "kubepods/pod1/memory.max": "2147483648\n", "kubepods/pod1/c1/memory.max": "1073741824\n"},
			cgroup: "0::/kubepods/pod1/c1\n", want: gi / 2, ok: true},
		{name: "v1, the container's cgroup mounted at the root, the host's path in /proc",
			files:  map[string]string{"memory/memory.limit_in_bytes": "536870912\n"},
			cgroup: "4:memory:/docker/abc\n", want: gi / 2, ok: true},
		{name: "v1, the limit on the parent", files: map[string]string{"memory/p/memory.limit_in_bytes": "536870912\n",
			"memory/p/c/memory.limit_in_bytes": "9223372036854771712\n", "memory/memory.limit_in_bytes": "9223372036854771712\n"},
			cgroup: "4:memory:/p/c\n", want: gi / 2, ok: true},
		{name: "no cgroup named, v2 root", files: map[string]string{"memory.max": "1073741824\n"}, want: gi, ok: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := t.TempDir()
			for rel, content := range c.files {
				write(t, root, rel, content)
			}
			got, ok, err := Limit(root, []byte(c.cgroup))
			if err != nil {
				t.Fatal(err)
			}
			if got != c.want || ok != c.ok {
				t.Fatalf("Limit = %d, %v; want %d, %v", got, ok, c.want, c.ok)
			}
		})
	}
}

func TestLimitUnreadable(t *testing.T) {
	root := t.TempDir()
	write(t, root, "memory.max", "two gigabytes\n")
	if _, _, err := Limit(root, []byte("0::/\n")); err == nil {
		t.Fatal("a limit that is not a number must be an error, not ignored")
	}
}

func TestApplyKeepsGOMEMLIMIT(t *testing.T) {
	t.Setenv("GOMEMLIMIT", "100MiB")
	if soft, err := Apply(); err != nil || soft != 0 {
		t.Fatalf("Apply = %d, %v; want GOMEMLIMIT to win", soft, err)
	}
}
