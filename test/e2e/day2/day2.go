package day2

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/diagnose"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// SpecInput is what Day2Spec runs against.
type SpecInput struct {
	// Upstream is the manager's control plane, the manager's controllers
	// running on it (Cluster offline after 15s).
	Upstream *controlplane.ControlPlane
	// Downstreams are two bare control planes, joined by the spec.
	Downstreams []*controlplane.ControlPlane
	// Admin is an admin client of Upstream, with the manager's scheme.
	Admin client.Client
	// LogDir receives the agents' logs.
	LogDir string
}

func (in SpecInput) validate() {
	Expect(in.Upstream).NotTo(BeNil(), "Day2Spec: SpecInput.Upstream is required")
	Expect(in.Downstreams).To(HaveLen(2), "Day2Spec: SpecInput.Downstreams needs two control planes")
	Expect(in.Admin).NotTo(BeNil(), "Day2Spec: SpecInput.Admin is required")
	Expect(in.LogDir).NotTo(BeEmpty(), "Day2Spec: SpecInput.LogDir is required")
}

const (
	ws      = fleet.DefaultWorkspace
	gitRepo = "day2"
	// appBundle is the bundle the manager makes of the repository's app/.
	appBundle = gitRepo + "-app"
	appNS     = "day2-app"
)

// appFleetYAML is app/'s fleet.yaml: tier bronze, gold for env=prod, and
// extra lines (a diff section) appended.
func appFleetYAML(prodTier, extra string) string {
	return "defaultNamespace: " + appNS + "\nhelm:\n  releaseName: app\n  values:\n    tier: bronze\n" +
		"targetCustomizations:\n- name: prod\n  clusterSelector: {matchLabels: {env: prod}}\n  helm: {values: {tier: " + prodTier + "}}\n" + extra
}

// repoFiles is the repository's first commit.
var repoFiles = map[string]string{
	"app/Chart.yaml": "apiVersion: v2\nname: app\nversion: 0.1.0\n",
	"app/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\ndata:\n" +
		"  tier: {{ .Values.tier | quote }}\n  owner: platform\n",
	"app/fleet.yaml": appFleetYAML("gold", ""),
}

// targetsYAML are the GitRepo's targets, as a --targets-file.
const targetsYAML = "targets:\n- name: all\n  clusterSelector:\n    matchExpressions:\n" +
	"    - {key: env, operator: In, values: [prod, dev]}\n"

// fixture is what the specs share: the manager, two joined clusters (prod
// labelled env=prod, dev env=dev), and the git repository the GitRepo
// follows.
type fixture struct {
	ctx        context.Context
	admin      client.Client
	kubeconfig string
	prod, dev  *e2e.JoinedCluster
	repo       *gittest.Repo
	server     *gittest.Server
	// dir holds the files the specs hand the CLI.
	dir string
	// commits are the repository's commits, oldest first.
	commits []string
	// targets is the path of a --targets-file with the GitRepo's targets.
	targets string
}

// Day2Spec joins two clusters, deploys a GitRepo to them, and runs the
// day-2 verbs of the fleet binary against the live fleet: analyze silent on
// the healthy fleet; preview of a commit changing the prod value, checked
// against what the manager then writes; bundlediff of a drifted object and
// its comparePatches pushed; deploy into a downstream cluster; cleanup of
// an orphaned registration; analyze finding, one spec per check, each
// problem planted and removed again, live and on a dump archive; and
// analyze finding an Offline agent, a failed deployment and an expiring
// token, on a dump archive that holds no Secret data. Call it in an Ordered
// container.
func Day2Spec(ctx context.Context, inputGetter func() SpecInput) {
	f := &fixture{ctx: ctx}
	BeforeAll(func() { f.setUp(inputGetter()) })
	AfterAll(func() { // the agents span the specs
		for _, c := range []*e2e.JoinedCluster{f.prod, f.dev} {
			if c != nil {
				c.StopAgents()
			}
		}
	})
	healthySteps(f)
	previewSteps(f)
	bundleDiffSteps(f)
	deploySteps(f)
	cleanupSteps(f)
	oneSpecPerCheckSteps(f)
	plantedProblemSteps(f)
}

func (f *fixture) setUp(in SpecInput) {
	GinkgoHelper()
	in.validate()
	f.admin, f.kubeconfig = in.Admin, in.Upstream.Kubeconfig
	f.dir = GinkgoT().TempDir()
	agentArgs := []string{"--checkin-interval", "5s", "--min-backoff", "100ms", "--max-backoff", "2s", "--resync", "5s"}
	for i, env := range []string{"prod", "dev"} {
		j := e2e.Join(f.ctx, e2e.JoinInput{Upstream: in.Upstream, Downstream: in.Downstreams[i], Admin: in.Admin, LogDir: in.LogDir,
			ConfigArgs: []string{"-l", "env=" + env}, AgentArgs: agentArgs}, 90*time.Second)
		if env == "prod" {
			f.prod = j
		} else {
			f.dev = j
		}
	}
	root := GinkgoT().TempDir()
	var err error
	f.repo, err = gittest.NewRepo(filepath.Join(root, gitRepo), "main")
	Expect(err).NotTo(HaveOccurred())
	f.commit("the app", repoFiles)
	f.server = gittest.NewServer(root)
	DeferCleanup(f.server.Close)
	f.targets = f.writeFile("targets.yaml", targetsYAML)
}

// commit commits files to the repository the GitRepo follows.
func (f *fixture) commit(msg string, files map[string]string, remove ...string) string {
	GinkgoHelper()
	sha, err := f.repo.Commit(msg, files, remove...)
	Expect(err).NotTo(HaveOccurred())
	f.commits = append(f.commits, sha)
	return sha
}

// writeFile writes a file under f.dir and returns its path.
func (f *fixture) writeFile(name, content string) string {
	GinkgoHelper()
	p := filepath.Join(f.dir, filepath.FromSlash(name))
	Expect(os.MkdirAll(filepath.Dir(p), 0o750)).To(Succeed())
	Expect(os.WriteFile(p, []byte(content), 0o600)).To(Succeed())
	return p
}

// result is what one run of the fleet binary printed, and its exit code.
type result struct {
	stdout, stderr string
	code           int
}

// fleetCmd runs the fleet binary in f.dir; a failure to start it fails the
// spec, a non-zero exit code is returned.
func (f *fixture) fleetCmd(args ...string) result {
	GinkgoHelper()
	bin, err := framework.Binary("fleet")
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithTimeout(f.ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = f.dir
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	r := result{stdout: out.String(), stderr: errOut.String()}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		r.code = exit.ExitCode()
	} else {
		Expect(err).NotTo(HaveOccurred(), "fleet %s", strings.Join(args, " "))
	}
	GinkgoWriter.Printf("$ fleet %s\n%s%s(exit %d)\n", strings.Join(args, " "), r.stdout, r.stderr, r.code)
	return r
}

// bd reads the cluster's BundleDeployment of a bundle (nil when none).
func (f *fixture) bd(c *e2e.JoinedCluster, bundle string) *fleet.BundleDeployment {
	GinkgoHelper()
	bd := &fleet.BundleDeployment{}
	err := f.admin.Get(f.ctx, types.NamespacedName{Namespace: c.Cred.ClusterNamespace, Name: bundle}, bd)
	if apierrors.IsNotFound(err) {
		return nil
	}
	Expect(err).NotTo(HaveOccurred())
	return bd
}

// waitState waits for the cluster's BundleDeployment of a bundle to be in
// state with its current deploymentID applied.
func (f *fixture) waitState(c *e2e.JoinedCluster, bundle string, state fleet.BundleState, timeout time.Duration) {
	GinkgoHelper()
	e2e.WaitFor(fmt.Sprintf("BundleDeployment %s on %s to be %s", bundle, c.Cluster.Name, state), func(g Gomega) {
		bd := f.bd(c, bundle)
		g.Expect(bd).NotTo(BeNil(), "no BundleDeployment %s for %s yet", bundle, c.Cluster.Name)
		if state != fleet.ErrApplied {
			// A deployment that failed is not applied: its Deployed
			// condition says why.
			g.Expect(bd.Status.AppliedDeploymentID).To(Equal(bd.Spec.DeploymentID), "BundleDeployment %s on %s not applied yet", bundle, c.Cluster.Name)
		}
		g.Expect(summary.State(bd)).To(Equal(state), "BundleDeployment %s on %s: %s\nstatus: %+v\nagent log:\n%s",
			bundle, c.Cluster.Name, summary.Message(bd), bd.Status, c.Agent.Tail(4000))
	}, timeout, 250*time.Millisecond)
}

// configMap reads a ConfigMap downstream.
func (f *fixture) configMap(c *e2e.JoinedCluster, ns, name string) *corev1.ConfigMap {
	GinkgoHelper()
	cm := &corev1.ConfigMap{}
	Expect(c.Local.Get(f.ctx, types.NamespacedName{Namespace: ns, Name: name}, cm)).To(Succeed())
	return cm
}

// clusterObject is how analyze names a Cluster.
func clusterObject(c *e2e.JoinedCluster) string {
	return "Cluster " + c.Cluster.Namespace + "/" + c.Cluster.Name
}

// bdObject is how analyze names the cluster's BundleDeployment of a bundle.
func bdObject(c *e2e.JoinedCluster, bundle string) string {
	return "BundleDeployment " + c.Cred.ClusterNamespace + "/" + bundle
}

// analysis is fleet analyze -o json's output.
type analysis struct {
	Findings []diagnose.Finding `json:"findings"`
	NotRun   []string           `json:"notRun"`
}

// analyze runs fleet analyze -o json with args and returns its findings
// and exit code.
func (f *fixture) analyze(args ...string) (analysis, int) {
	GinkgoHelper()
	r := f.fleetCmd(append([]string{"analyze", "-o", "json"}, args...)...)
	var a analysis
	Expect(json.Unmarshal([]byte(r.stdout), &a)).To(Succeed(), "fleet analyze -o json printed:\n%s%s", r.stdout, r.stderr)
	return a, r.code
}

// dumps counts the archives liveAndDump writes.
var dumps int

// liveAndDump runs analyze with args on the live fleet, takes a dump archive
// right after and runs analyze with args on it; both must exit 1 (something
// needs attention) and give the same findings. It returns the two analyses
// and the archive's name (under f.dir).
//
// The two are taken a moment apart, and a live fleet may move in that
// moment (a deployment passing a --stuck-after threshold, another being
// applied): when they disagree, all three are taken again, a few times, and
// each disagreement is logged. A dump that loses or changes a finding
// disagrees every time.
func (f *fixture) liveAndDump(args ...string) (live, offline analysis, archive string) {
	GinkgoHelper()
	const tries = 3
	for try := 1; ; try++ {
		var code int
		live, code = f.analyze(append([]string{"-k", f.kubeconfig}, args...)...)
		Expect(code).To(Equal(1), "the exit code says something needs attention")
		dumps++
		archive = fmt.Sprintf("dump-%d.tgz", dumps)
		d := f.fleetCmd("dump", "-k", f.kubeconfig, "-o", archive)
		Expect(d.code).To(Equal(0), d.stderr)
		offline, code = f.analyze(append([]string{"--dump", archive}, args...)...)
		Expect(code).To(Equal(1), "analyze of the dump exits 1 as well")
		liveKeys, offKeys := keys(live.Findings), keys(offline.Findings)
		if try < tries && !slices.Equal(liveKeys, offKeys) {
			GinkgoWriter.Printf("try %d: the live fleet and its dump disagree, taking both again:\nlive: %v\ndump: %v\n", try, liveKeys, offKeys)
			continue
		}
		Expect(offKeys).To(Equal(liveKeys), "the dump gives the findings the live fleet gave (try %d of %d)", try, tries)
		return live, offline, archive
	}
}

// keys are findings as "check severity object", sorted: what two analyses
// of the same state agree on (their messages say how long ago).
func keys(findings []diagnose.Finding) []string {
	out := make([]string, 0, len(findings))
	for _, fd := range findings {
		out = append(out, fmt.Sprintf("%s %s %s", fd.Check, fd.Severity, fd.Object))
	}
	sort.Strings(out)
	return out
}

// finding returns the finding of check about object, or fails.
func finding(a analysis, check, object string) diagnose.Finding {
	GinkgoHelper()
	for _, fd := range a.Findings {
		if fd.Check == check && fd.Object == object {
			return fd
		}
	}
	Fail(fmt.Sprintf("no %s finding for %s among %v", check, object, keys(a.Findings)))
	return diagnose.Finding{}
}

// gitRepoObject is the GitRepo the specs create.
func (f *fixture) gitRepoObject() *fleet.GitRepo {
	return &fleet.GitRepo{
		ObjectMeta: metav1.ObjectMeta{Name: gitRepo, Namespace: ws},
		Spec: fleet.GitRepoSpec{
			Repo: f.server.RepoURL(gitRepo), Branch: "main",
			PollingInterval: &metav1.Duration{Duration: time.Second},
			Targets: []fleet.GitTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
				{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"prod", "dev"}}}}}},
		},
	}
}
