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
	paths     []string // files and directories it names
	commands  []string // shell commands it runs
	resources map[string]*resource
	problems  []string
}

// resource is one local_resource.
type resource struct {
	cmd, serveCmd string
	// deps are the paths whose change reruns or restarts it, made absolute.
	deps []string
	// resourceDeps are the resources that must be up before it starts.
	resourceDeps []string
}

// evaluate runs the Tiltfile in dir with the given --mode (empty: default).
func evaluate(t *testing.T, file, mode string) *calls {
	t.Helper()
	dir := filepath.Dir(file)
	c := &calls{resources: map[string]*resource{}}
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
			r := &resource{}
			for _, k := range []string{"cmd", "serve_cmd"} {
				if v, ok := starlark.AsString(kw(kwargs, k)); ok {
					c.commands = append(c.commands, v)
					if k == "cmd" {
						r.cmd = v
					} else {
						r.serveCmd = v
					}
				}
			}
			if d := kw(kwargs, "deps"); d != nil {
				before := len(c.paths)
				paths(d)
				r.deps = append(r.deps, c.paths[before:]...)
			}
			r.resourceDeps = append(r.resourceDeps, stringList(kw(kwargs, "resource_deps"))...)
			name, _ := starlark.AsString(args[0])
			c.resources[name] = r
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

// stringList returns the strings of a Starlark list (nil for anything else).
func stringList(v starlark.Value) []string {
	l, ok := v.(*starlark.List)
	if !ok {
		return nil
	}
	var out []string
	for i := range l.Len() {
		if s, ok := starlark.AsString(l.Index(i)); ok {
			out = append(out, s)
		}
	}
	return out
}

var (
	makeCall = regexp.MustCompile(`make -C (\S+) (\S+)`)
	// goBuild is a command that builds binaries into bin/: its outputs
	// are bin/<last element of each ./cmd/ package>.
	goBuild  = regexp.MustCompile(`go build .*-o bin/ ((?:\./cmd/\S+ ?)+)`)
	fleetDev = regexp.MustCompile(`bin/fleet dev (\S+)((?: --\S+)*)`)
)

// outputs are the binaries a resource's command builds, as absolute paths.
func outputs(root string, r *resource) []string {
	m := goBuild.FindStringSubmatch(r.cmd)
	if m == nil {
		return nil
	}
	var out []string
	for _, pkg := range strings.Fields(m[1]) {
		out = append(out, filepath.Join(root, "bin", filepath.Base(pkg)))
	}
	return out
}

// check returns what the Tiltfile names that does not exist.
func check(t *testing.T, c *calls, root string) []string {
	t.Helper()
	problems := append([]string{}, c.problems...)
	built := map[string]bool{}
	for _, r := range c.resources {
		for _, o := range outputs(root, r) {
			built[o] = true
		}
	}
	for name, r := range c.resources {
		for _, d := range r.resourceDeps {
			if c.resources[d] == nil {
				problems = append(problems, fmt.Sprintf("resource %s waits for %s, which the Tiltfile does not define", name, d))
			}
		}
	}
	for _, p := range c.paths {
		if built[filepath.Clean(p)] {
			continue
		}
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
		// Every `fleet dev` command and flag it runs exists.
		for _, m := range fleetDev.FindAllStringSubmatch(cmd, -1) {
			bin, err := framework.Binary("fleet")
			if err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command(bin, "dev", m[1], "--help").CombinedOutput()
			if err != nil {
				problems = append(problems, fmt.Sprintf("fleet dev %s: %v: %s", m[1], err, out))
				continue
			}
			for _, flag := range strings.Fields(m[2]) {
				if !strings.Contains(string(out), flag+" ") {
					problems = append(problems, fmt.Sprintf("fleet dev %s has no flag %s", m[1], flag))
				}
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

// restarted returns the resources a change to path reruns or restarts: those
// whose deps hold it, then those whose deps hold a binary one of them
// builds, and so on.
func restarted(root string, c *calls, path string) map[string]bool {
	changed := []string{path}
	hit := map[string]bool{}
	for len(changed) > 0 {
		p := changed[0]
		changed = changed[1:]
		for name, r := range c.resources {
			if hit[name] {
				continue
			}
			for _, d := range r.deps {
				if d = filepath.Clean(d); p == d || strings.HasPrefix(p, d+string(filepath.Separator)) {
					hit[name] = true
					changed = append(changed, outputs(root, r)...)
					break
				}
			}
		}
	}
	return hit
}

// In local mode the control planes keep running: a change to the manager's
// sources rebuilds and restarts the manager alone, one to the agent's the
// agents alone, and the serve commands run against what is already up.
func TestLocalLoopRestartsOnlyWhatChanged(t *testing.T) {
	g := NewWithT(t)
	root := framework.RepoRoot()
	c := evaluate(t, filepath.Join(root, "tilt", "Tiltfile"), "")
	g.Expect(c.problems).To(BeEmpty())
	g.Expect(c.resources).To(HaveKey("control-planes"))
	g.Expect(c.resources["control-planes"].cmd).To(ContainSubstring("bin/fleet dev up --no-manager --no-agents"))
	g.Expect(c.resources["control-planes"].deps).To(BeEmpty(), "the control planes start once")
	g.Expect(c.resources).To(HaveKey("manager"))
	g.Expect(c.resources["manager"].serveCmd).To(ContainSubstring("bin/fleet dev manager"))
	g.Expect(c.resources["manager"].resourceDeps).To(ContainElement("control-planes"))
	g.Expect(c.resources).To(HaveKey("agents"))
	g.Expect(c.resources["agents"].serveCmd).To(ContainSubstring("bin/fleet dev agents"))
	g.Expect(c.resources["agents"].resourceDeps).To(ContainElement("manager"), "the agents wait for what the manager installs")

	for _, tc := range []struct {
		file            string
		want, untouched []string
	}{
		{"controllers/manager.go", []string{"manager"}, []string{"agents", "control-planes"}},
		{"cmd/fleet-manager/main.go", []string{"manager"}, []string{"agents", "control-planes"}},
		{"agent/agent.go", []string{"agents"}, []string{"manager", "control-planes"}},
		{"cmd/fleet-agent-deploy/main.go", []string{"agents"}, []string{"manager", "control-planes"}},
		{"internal/names/names.go", []string{"manager", "agents"}, []string{"control-planes"}},
	} {
		hit := restarted(root, c, filepath.Join(root, tc.file))
		for _, w := range tc.want {
			g.Expect(hit).To(HaveKey(w), "a change to %s restarts %s", tc.file, w)
		}
		for _, n := range tc.untouched {
			g.Expect(hit).NotTo(HaveKey(n), "a change to %s leaves %s running", tc.file, n)
		}
	}
}

// Each build resource of the local loop watches every folder of this
// module that its binaries link, so no change is missed, and no top-level
// folder they do not link (an agent change does not rebuild the manager).
func TestLocalBuildDepsAreWhatTheBinariesLink(t *testing.T) {
	root := framework.RepoRoot()
	c := evaluate(t, filepath.Join(root, "tilt", "Tiltfile"), "")
	const module = "github.com/gitfleet/fleet"
	builds := 0
	for name, r := range c.resources {
		m := goBuild.FindStringSubmatch(r.cmd)
		if m == nil {
			continue
		}
		builds++
		args := append([]string{"list", "-deps", "-f", "{{if not .Standard}}{{.ImportPath}}{{end}}"}, strings.Fields(m[1])...)
		cmd := exec.Command("go", args...)
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("go %v: %v", args, err)
		}
		linkedTop := map[string]bool{}
		for _, pkg := range strings.Fields(string(out)) {
			rel, ok := strings.CutPrefix(pkg, module+"/")
			if !ok {
				continue
			}
			linkedTop[strings.Split(rel, "/")[0]] = true
			dir := filepath.Join(root, rel)
			covered := false
			for _, d := range r.deps {
				if d = filepath.Clean(d); dir == d || strings.HasPrefix(dir, d+string(filepath.Separator)) {
					covered = true
				}
			}
			if !covered {
				t.Errorf("resource %s builds %s, which links %s, but does not watch it", name, m[1], rel)
			}
		}
		for _, d := range r.deps {
			rel, err := filepath.Rel(root, filepath.Clean(d))
			if err != nil {
				t.Fatal(err)
			}
			if top := strings.Split(rel, string(filepath.Separator))[0]; top != "cmd" && !linkedTop[top] {
				t.Errorf("resource %s watches %s, which %s does not link: a change there would rebuild it for nothing", name, rel, m[1])
			}
		}
	}
	if builds < 3 {
		t.Fatalf("found %d build resources, want the CLI's, the manager's and the agent's", builds)
	}
}
