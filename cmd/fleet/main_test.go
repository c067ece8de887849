package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	. "github.com/onsi/gomega"

	"github.com/gitfleet/fleet/internal/version"
	"github.com/gitfleet/fleet/test/framework"
)

func execute(args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	root := newRoot()
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(args)
	err = root.Execute()
	return out.String(), errOut.String(), err
}

func TestVersion(t *testing.T) {
	g := NewWithT(t)
	out, _, err := execute("--version")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(version.Get()).NotTo(BeEmpty())
	g.Expect(out).To(Equal("fleet version " + version.Get() + "\n"))
}

func TestCompletion(t *testing.T) {
	g := NewWithT(t)
	out, _, err := execute("completion", "bash")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(out).To(ContainSubstring("bash completion"))
	g.Expect(out).To(ContainSubstring("__start_fleet"))
}

// fleet apply -o - writes only the Bundles on stdout, so they can be piped
// on; what it is doing goes to stderr.
func TestApplyProgressOnStderr(t *testing.T) {
	g := NewWithT(t)
	dir := t.TempDir()
	g.Expect(os.MkdirAll(filepath.Join(dir, "app"), 0o755)).To(Succeed())
	g.Expect(os.WriteFile(filepath.Join(dir, "app", "cm.yaml"),
		[]byte("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n"), 0o644)).To(Succeed())
	t.Chdir(dir)
	out, errOut, err := execute("apply", "demo", "app", "-o", "-")
	g.Expect(err).NotTo(HaveOccurred())
	objs, err := framework.DecodeYAML([]byte(out))
	g.Expect(err).NotTo(HaveOccurred(), "stdout is YAML only: %s", out)
	g.Expect(objs).To(HaveLen(1))
	g.Expect(objs[0].GetKind()).To(Equal("Bundle"))
	g.Expect(out).NotTo(ContainSubstring("==>"))
	g.Expect(errOut).To(ContainSubstring("==> Reading bundles from app"))
	g.Expect(errOut).To(ContainSubstring("==> Read 1 bundle in"))
	g.Expect(strings.Count(errOut, "\n")).To(Equal(2))
}
