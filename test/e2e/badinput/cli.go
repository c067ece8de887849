package badinput

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/kubeconfig"
	"github.com/gitfleet/fleet/test/framework"
)

// cliCase is one run of the fleet CLI, in a directory holding files and
// links, that must fail saying msg. In args, KUBECONFIG stands for the
// manager's admin kubeconfig and FORGED for one with a forged token.
type cliCase struct {
	files map[string]string
	links map[string]string
	args  []string
	msg   []string
}

// The CLI's arguments that stand for files made at run time.
const (
	adminKubeconfig  = "KUBECONFIG"
	forgedKubeconfig = "FORGED"
)

// cliObjects lists the Bundles whose names start with "cli", which only a CLI
// case would make, and the registration tokens of the default workspace.
func (f *fixture) cliObjects() []string {
	GinkgoHelper()
	var out []string
	bundles := &fleet.BundleList{}
	Expect(f.admin.List(f.ctx, bundles)).To(Succeed())
	for _, b := range bundles.Items {
		if strings.HasPrefix(b.Name, "cli") {
			out = append(out, "bundle "+b.Name)
		}
	}
	tokens := &fleet.ClusterRegistrationTokenList{}
	Expect(f.admin.List(f.ctx, tokens, client.InNamespace(ws))).To(Succeed())
	for _, t := range tokens.Items {
		out = append(out, "token "+t.Name)
	}
	return out
}

func (f *fixture) cliSurface() {
	var forged, dir string
	BeforeAll(func() {
		dir = filepath.Join(f.logDir, "cli")
		Expect(os.MkdirAll(dir, 0o755)).To(Succeed())
		cfg := *f.upstream.Config
		cfg.CertData, cfg.KeyData, cfg.BearerToken = nil, nil, "forged-token"
		kc, err := kubeconfig.FromREST(&cfg, "forged")
		must(err)
		forged = filepath.Join(dir, "forged.kubeconfig")
		Expect(os.WriteFile(forged, kc, 0o600)).To(Succeed())
	})

	DescribeTable("a fleet CLI run on bad input fails, saying why, and writes nothing", func(c cliCase) {
		before := f.cliObjects()
		work := filepath.Join(dir, strings.ReplaceAll(CurrentSpecReport().LeafNodeText, " ", "-"))
		Expect(os.MkdirAll(work, 0o755)).To(Succeed())
		writeTree(work, c.files, c.links)
		bin, err := framework.Binary("fleet")
		Expect(err).NotTo(HaveOccurred())
		args := make([]string, len(c.args))
		for i, a := range c.args {
			args[i] = strings.NewReplacer(adminKubeconfig, f.upstream.Kubeconfig, forgedKubeconfig, forged).Replace(a)
		}
		cmd := exec.CommandContext(f.ctx, bin, args...)
		cmd.Dir = work
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err = cmd.Run()
		var exit *exec.ExitError
		Expect(errors.As(err, &exit)).To(BeTrue(), "fleet %v must fail; it printed:\n%s", args, stdout.String())
		Expect(exit.ExitCode()).NotTo(BeZero())
		Expect(stderr.String()).To(containsAll(c.msg...))
		By("fleet " + strings.Join(c.args, " ") + " says: " + strings.TrimSpace(stderr.String()))
		Expect(f.cliObjects()).To(Equal(before), "nothing was written")
		f.expectUndisturbed()
	},
		Entry("malformed YAML in fleet.yaml", cliCase{files: map[string]string{"app/fleet.yaml": "helm:\n  values: [\n", "app/cm.yaml": cm},
			args: []string{"apply", "cli", "app", "-k", adminKubeconfig}, msg: []string{"app/fleet.yaml: invalid YAML"}}),
		Entry("a Fleet field of the wrong type beside an unknown one, in fleet.yaml", cliCase{files: map[string]string{"app/fleet.yaml": "helm:\n  chartt: x\n  disableDependencyUpdate: sometimes\n", "app/cm.yaml": cm},
			args: []string{"apply", "cli", "app", "-o", "-"}, msg: []string{"app/fleet.yaml: line 3: field helm.disableDependencyUpdate: cannot use a string as a boolean"}}),
		Entry("an invalid selector in fleet.yaml overrideTargets", cliCase{files: map[string]string{"app/fleet.yaml": "overrideTargets:\n- clusterSelector: {matchLabels: {env: \"not a value\"}}\n", "app/cm.yaml": cm},
			args: []string{"apply", "cli", "app", "-o", "-"}, msg: []string{"app/fleet.yaml: line 2: overrideTargets[0].clusterSelector is not a valid label selector"}}),
		Entry("a path leaving the directory", cliCase{files: map[string]string{"app/cm.yaml": cm},
			args: []string{"apply", "cli", "../..", "-o", "-"}, msg: []string{`path "../.." leaves the repository root`}}),
		Entry("an absolute path outside the directory", cliCase{files: map[string]string{"app/cm.yaml": cm},
			args: []string{"apply", "cli", "/etc", "-o", "-"}, msg: []string{"no bundle found in /etc: add a fleet.yaml or manifests"}}),
		Entry("a symlink leaving the directory", cliCase{files: map[string]string{"app/fleet.yaml": "", "app/cm.yaml": cm},
			links: map[string]string{"app/leak.yaml": "/etc/passwd"},
			args:  []string{"apply", "cli", "app", "-o", "-"}, msg: []string{"symlink app/leak.yaml points outside the repository root"}}),
		Entry("a directory without bundles", cliCase{files: map[string]string{"docs/README.md": "nothing to deploy"},
			args: []string{"apply", "cli", "docs", "-o", "-"}, msg: []string{"no bundle found in docs: add a fleet.yaml or manifests"}}),
		Entry("a file too large for the API server", cliCase{files: map[string]string{"app/fleet.yaml": "", "app/big.yaml": "# " + strings.Repeat("x", 3584*1024)},
			args: []string{"apply", "cli", "app", "-k", adminKubeconfig}, msg: []string{`bundle "cli-app" in app has 3.5 MiB`, "bundle too large for the API server's request limit"}}),
		Entry("a bundle the API server rejects", cliCase{files: map[string]string{"app/fleet.yaml": "rolloutStrategy: {maxUnavailable: ten}\n", "app/cm.yaml": cm},
			args: []string{"apply", "cli", "app", "-k", adminKubeconfig}, msg: []string{"bundle fleet-default/cli-app", "spec.rolloutStrategy.maxUnavailable"}}),
		Entry("a label the API server rejects", cliCase{files: map[string]string{"app/fleet.yaml": "", "app/cm.yaml": cm},
			args: []string{"apply", "cli", "app", "-l", "not a key=v", "-k", adminKubeconfig}, msg: []string{"bundle fleet-default/cli-app", "metadata.labels"}}),
		Entry("a GitRepo's bundle as target", cliCase{files: map[string]string{"plain/fleet.yaml": "", "plain/cm.yaml": cm},
			args: []string{"apply", "healthy", "plain", "-k", adminKubeconfig}, msg: []string{"bundle fleet-default/healthy-plain", "GitRepo healthy"}}),
		Entry("a kubeconfig with a forged token", cliCase{files: map[string]string{"app/fleet.yaml": "", "app/cm.yaml": cm},
			args: []string{"apply", "cli", "app", "-k", forgedKubeconfig}, msg: []string{"bundle fleet-default/cli-app", "the server has asked for the client to provide credentials"}}),
		Entry("a kubeconfig that does not exist", cliCase{files: map[string]string{"app/fleet.yaml": "", "app/cm.yaml": cm},
			args: []string{"apply", "cli", "app", "-k", "no-such.kubeconfig"}, msg: []string{"loading kubeconfig", "no-such.kubeconfig"}}),
		Entry("apply without a name", cliCase{args: []string{"apply"}, msg: []string{"requires at least 1 arg(s)"}}),
		Entry("a negative token ttl", cliCase{args: []string{"install", "agent-token", "--ttl", "-1s", "-k", adminKubeconfig},
			msg: []string{"--ttl must not be negative"}}),
		Entry("a token ttl that is no duration", cliCase{args: []string{"install", "agent-token", "--ttl", "1week", "-k", adminKubeconfig},
			msg: []string{`invalid argument "1week" for "--ttl"`}}),
		Entry("a token made with a forged kubeconfig", cliCase{args: []string{"install", "agent-token", "-k", forgedKubeconfig},
			msg: []string{"creating a registration token in namespace fleet-default", "the server has asked for the client to provide credentials"}}),
		Entry("agent-config with an invalid label", cliCase{args: []string{"install", "agent-config", "-l", "env=not a value"},
			msg: []string{"env", "not a value"}}),
	)
}
