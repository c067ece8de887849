// Package tilt_test evaluates the Tiltfile with a Starlark interpreter against
// stand-ins for Tilt's built-ins (Tilt itself is not installed here) and
// checks that every path, make target and command it names exists.
package tilt_test

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	"go.starlark.net/starlark"
	"go.starlark.net/starlarkstruct"
	"go.starlark.net/syntax"

	"github.com/gitfleet/fleet/test/framework"
)

// calls records what the Tiltfile asked Tilt to do.
type calls struct {
	paths    []string // files and directories it names
	commands []string // shell commands it runs
	problems []string
}

// evaluate runs the Tiltfile in dir with the given --mode (empty: default).
func evaluate(t *testing.T, file, mode string) *calls {
	t.Helper()
	dir := filepath.Dir(file)
	c := &calls{}
	path := func(v starlark.Value) {
		if s, ok := starlark.AsString(v); ok {
			c.paths = append(c.paths, filepath.Join(dir, s))
		}
	}
	paths := func(v starlark.Value) {
		if l, ok := v.(*starlark.List); ok {
			for i := range l.Len() {
				path(l.Index(i))
			}
			return
		}
		path(v)
	}
	builtin := func(name string, fn func(args starlark.Tuple, kwargs []starlark.Tuple)) *starlark.Builtin {
		return starlark.NewBuiltin(name, func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, kwargs []starlark.Tuple) (starlark.Value, error) {
			fn(args, kwargs)
			return starlark.None, nil
		})
	}
	kw := func(kwargs []starlark.Tuple, key string) starlark.Value {
		for _, p := range kwargs {
			if k, _ := starlark.AsString(p[0]); k == key {
				return p[1]
			}
		}
		return nil
	}
	parsed := starlark.NewDict(1)
	if mode != "" {
		_ = parsed.SetKey(starlark.String("mode"), starlark.String(mode))
	}
	predeclared := starlark.StringDict{
		"config": &starlarkstruct.Module{Name: "config", Members: starlark.StringDict{
			"define_string": builtin("define_string", func(starlark.Tuple, []starlark.Tuple) {}),
			"parse": starlark.NewBuiltin("parse", func(*starlark.Thread, *starlark.Builtin, starlark.Tuple, []starlark.Tuple) (starlark.Value, error) {
				return parsed, nil
			}),
		}},
		"local_resource": builtin("local_resource", func(args starlark.Tuple, kwargs []starlark.Tuple) {
			for _, k := range []string{"cmd", "serve_cmd"} {
				if v, ok := starlark.AsString(kw(kwargs, k)); ok {
					c.commands = append(c.commands, v)
				}
			}
			if d := kw(kwargs, "deps"); d != nil {
				paths(d)
			}
		}),
		"docker_build": builtin("docker_build", func(args starlark.Tuple, kwargs []starlark.Tuple) {
			if len(args) > 1 {
				path(args[1])
			}
			for _, k := range []string{"dockerfile", "only"} {
				if v := kw(kwargs, k); v != nil {
					paths(v)
				}
			}
		}),
		"kustomize": starlark.NewBuiltin("kustomize", func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
			path(args[0])
			return starlark.String("yaml"), nil
		}),
		"k8s_yaml":     builtin("k8s_yaml", func(starlark.Tuple, []starlark.Tuple) {}),
		"k8s_resource": builtin("k8s_resource", func(starlark.Tuple, []starlark.Tuple) {}),
		"fail": starlark.NewBuiltin("fail", func(_ *starlark.Thread, _ *starlark.Builtin, args starlark.Tuple, _ []starlark.Tuple) (starlark.Value, error) {
			return nil, fmt.Errorf("fail(%v)", args)
		}),
	}
	thread := &starlark.Thread{Name: "tiltfile"}
	_, err := starlark.ExecFileOptions(&syntax.FileOptions{TopLevelControl: true, GlobalReassign: true, While: true, Set: true}, thread, file, nil, predeclared)
	if err != nil {
		c.problems = append(c.problems, err.Error())
	}
	return c
}

var makeCall = regexp.MustCompile(`make -C (\S+) (\S+)`)

// check returns what the Tiltfile names that does not exist.
func check(t *testing.T, c *calls, root string) []string {
	problems := append([]string{}, c.problems...)
	for _, p := range c.paths {
		if _, err := os.Stat(p); err != nil {
			problems = append(problems, "missing path "+p)
		}
	}
	makefile, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range c.commands {
		for _, m := range makeCall.FindAllStringSubmatch(cmd, -1) {
			if !regexp.MustCompile(`(?m)^` + regexp.QuoteMeta(m[2]) + `:`).Match(makefile) {
				problems = append(problems, "no make target "+m[2])
			}
		}
		if strings.Contains(cmd, "bin/fleet dev up") {
			bin, err := framework.Binary("fleet")
			if err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command(bin, "dev", "up", "--help").CombinedOutput(); err != nil {
				problems = append(problems, fmt.Sprintf("fleet dev up: %v: %s", err, out))
			}
		}
	}
	return problems
}

func TestMain(m *testing.M) {
	code := m.Run()
	framework.RemoveBinaries()
	os.Exit(code)
}

func TestTiltfile(t *testing.T) {
	root := framework.RepoRoot()
	file := filepath.Join(root, "tilt", "Tiltfile")
	for _, mode := range []string{"", "cluster"} {
		t.Run("mode="+mode, func(t *testing.T) {
			g := NewWithT(t)
			c := evaluate(t, file, mode)
			g.Expect(len(c.commands)+len(c.paths)).To(BeNumerically(">", 3), "the stand-ins saw what the Tiltfile does")
			g.Expect(check(t, c, root)).To(BeEmpty())
		})
	}
}

// The check notices a path that no longer exists.
func TestTiltfileRenamedPath(t *testing.T) {
	g := NewWithT(t)
	root := framework.RepoRoot()
	raw, err := os.ReadFile(filepath.Join(root, "tilt", "Tiltfile"))
	g.Expect(err).NotTo(HaveOccurred())
	mutated := strings.Replace(string(raw), "/config/default')", "/config/defaults')", 1)
	file := filepath.Join(root, "tilt", ".Tiltfile-renamed")
	g.Expect(os.WriteFile(file, []byte(mutated), 0o644)).To(Succeed())
	defer os.Remove(file)
	c := evaluate(t, file, "cluster")
	g.Expect(check(t, c, root)).To(ContainElement(HaveSuffix("config/defaults")))
}
