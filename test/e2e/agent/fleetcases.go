package agent

import (
	"context"
	"fmt"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// fleetCaseDeadline is what Fleet's own end-to-end suites give a GitRepo to
// reach its clusters: each case must show a Ready BundleDeployment within it.
const fleetCaseDeadline = 45 * time.Second

// gitHTTPBackend serves the cases' repository over HTTP, pushes included,
// as the git server of Fleet's suites does.
const gitHTTPBackend = "/usr/lib/git-core/git-http-backend"

// fleetCases is what FleetCasesSpec's steps share: a workspace with a
// Cluster made there by hand, the downstream cluster whose agent registered
// onto it, and a git repository served over HTTP with a clone to push from.
type fleetCases struct {
	ctx       context.Context
	admin     client.Client
	workspace string
	cluster   *cluster
	repoURL   string
	clone     string
}

// FleetCasesSpec runs, with a real agent, the three cases where Fleet's own
// end-to-end suites saw no BundleDeployment, or none Ready, within 45
// seconds (issue #34): a GitRepo without targets in a new workspace whose
// Cluster was made there by hand, a GitRepo polled over HTTP after a push,
// and a GitRepo mapped into the Cluster's workspace by a
// BundleNamespaceMapping whose targetNamespace a GitRepoRestriction allows.
//
// It joins the suite's first downstream cluster again, with an agent in a
// system namespace of its own, onto a Cluster it creates by hand in a
// workspace of its own, so it runs before or after the other specs, or alone;
// it removes what it made when done. Call it in an Ordered container.
func FleetCasesSpec(ctx context.Context, inputGetter func() SpecInput) {
	s := &fleetCases{ctx: ctx, workspace: "fleetcases", cluster: &cluster{ctx: ctx}}
	BeforeAll(func() { s.setUp(inputGetter()) })
	It("deploys a GitRepo without targets in a new workspace to the Cluster made there by hand, once a ClusterGroup default selects it, as in Fleet", s.targetless)
	It("deploys what a push to a repository polled over HTTP brings, and the GitRepo turns Ready again", s.pushed)
	It("deploys a mapped GitRepo's bundle into a targetNamespace a GitRepoRestriction allows", s.mapped)
}

func (s *fleetCases) setUp(input SpecInput) {
	input.validate("FleetCasesSpec")
	s.admin = input.Admin
	_, err := os.Stat(gitHTTPBackend)
	Expect(err).NotTo(HaveOccurred(), "install git: its git-http-backend serves the repository")

	By("a Cluster made by hand in a new workspace, and the cluster's agent registering onto it")
	Expect(s.admin.Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.workspace}})).To(Succeed())
	const clientID = "fleetcases-by-hand"
	byHand := &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "by-hand", Namespace: s.workspace, Labels: map[string]string{"env": "fleetcases"}},
		Spec: fleet.ClusterSpec{ClientID: clientID}}
	Expect(s.admin.Create(s.ctx, byHand)).To(Succeed())
	j := e2e.NewJoinedCluster(e2e.JoinInput{Upstream: input.Upstream, Downstream: input.Downstreams[0], Admin: s.admin,
		LogDir: input.LogDir, SystemNamespace: "fleetcases-system", AgentArgs: agentArgs(), ConfigArgs: []string{"--client-id", clientID, "-l", "env=fleetcases"}})
	s.cluster.JoinedCluster = j
	j.ApplyToken(s.ctx, "-g", s.workspace)
	j.ApplyConfig(s.ctx)
	j.StartAgent()
	j.WaitRegistered(s.ctx, registerTimeout)
	Expect(j.Cluster.UID).To(Equal(byHand.UID), "the agent registered onto the Cluster made by hand")
	DeferCleanup(func() {
		j.StopAgents()
		Expect(client.IgnoreNotFound(s.admin.Delete(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: s.workspace}}))).To(Succeed())
	})

	By("a repository served over HTTP by git-http-backend, and a clone to push from")
	root, err := os.MkdirTemp("", "fleet-e2e-fleetcases-")
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(os.RemoveAll, root)
	gitCmd(root, "init", "-q", "--bare", "-b", "master", "cases.git")
	gitCmd(filepath.Join(root, "cases.git"), "config", "http.receivepack", "true")
	srv := httptest.NewServer(&cgi.Handler{Path: gitHTTPBackend, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}})
	DeferCleanup(srv.Close)
	s.repoURL = srv.URL + "/cases.git"
	s.clone = filepath.Join(root, "clone")
	gitCmd(root, "clone", "-q", s.repoURL, s.clone)
	s.push(map[string]string{
		"simple/cm.yaml":    caseConfigMap("simple", "1"),
		"polled/cm.yaml":    caseConfigMap("polled", "1"),
		"polled/fleet.yaml": "defaultNamespace: fleetcases-polled\n",
		"mapped/cm.yaml":    caseConfigMap("mapped", "1"),
	})
}

// targetless: a GitRepo without targets gets Fleet's default target,
// ClusterGroup default, which Fleet's bootstrap makes in fleet-local only;
// in a new workspace nothing is deployed until the user makes one there.
func (s *fleetCases) targetless() {
	gr := s.gitRepo(s.workspace, "targetless", fleet.GitRepoSpec{Paths: []string{"simple"}})
	bundle := "targetless-simple"
	e2e.WaitFor("the targetless GitRepo's Bundle", func(g Gomega) {
		b := &fleet.Bundle{}
		g.Expect(s.admin.Get(s.ctx, types.NamespacedName{Namespace: s.workspace, Name: bundle}, b)).To(Succeed())
		g.Expect(b.Spec.Targets).To(ConsistOf(HaveField("ClusterGroup", "default")), "Fleet's default target")
	}, time.Minute, 250*time.Millisecond)
	e2e.HoldsFor("no BundleDeployment without a ClusterGroup default in the workspace", func(g Gomega) {
		g.Expect(s.cluster.bd(bundle)).To(BeNil())
	}, 3*time.Second, 250*time.Millisecond)

	By("a ClusterGroup default selecting the Cluster, as Fleet's bootstrap makes in fleet-local")
	start := time.Now()
	Expect(s.admin.Create(s.ctx, &fleet.ClusterGroup{ObjectMeta: metav1.ObjectMeta{Name: "default", Namespace: s.workspace},
		Spec: fleet.ClusterGroupSpec{Selector: selector("env", "fleetcases")}})).To(Succeed())
	s.cluster.waitState(bundle, fleet.Ready, fleetCaseDeadline)
	GinkgoWriter.Printf("targetless: Ready %s after the ClusterGroup\n", time.Since(start).Round(100*time.Millisecond))
	Expect(configMap(s.cluster, "default", "simple").Data).To(HaveKeyWithValue("value", "1"))
	s.gitRepoReady(gr, fleetCaseDeadline-time.Since(start))
}

// pushed: a GitRepo polled at Fleet's default interval (15s) over HTTP
// takes up a pushed commit, its BundleDeployment deploys it and turns Ready,
// and so does the GitRepo, within Fleet's deadline.
func (s *fleetCases) pushed() {
	gr := s.gitRepo(s.workspace, "polled", fleet.GitRepoSpec{Paths: []string{"polled"},
		Targets: []fleet.GitTarget{{Name: "by-hand", ClusterName: s.cluster.Cluster.Name}}})
	bundle := "polled-polled"
	s.cluster.waitState(bundle, fleet.Ready, fleetCaseDeadline)
	s.gitRepoReady(gr, fleetCaseDeadline)

	commit := s.push(map[string]string{"polled/cm.yaml": caseConfigMap("polled", "2")})
	start := time.Now()
	e2e.WaitFor(fmt.Sprintf("the BundleDeployment of %s at commit %s, Ready", bundle, commit), func(g Gomega) {
		bd := s.cluster.bd(bundle)
		g.Expect(bd).NotTo(BeNil())
		g.Expect(bd.Labels).To(HaveKeyWithValue(fleet.CommitLabel, commit))
		g.Expect(bd.Status.AppliedDeploymentID).To(Equal(bd.Spec.DeploymentID))
		g.Expect(summary.State(bd)).To(Equal(fleet.Ready), "%s", summary.Message(bd))
	}, fleetCaseDeadline, 250*time.Millisecond)
	GinkgoWriter.Printf("pushed: BundleDeployment Ready %s after the push\n", time.Since(start).Round(100*time.Millisecond))
	Expect(configMap(s.cluster, "fleetcases-polled", "polled").Data).To(HaveKeyWithValue("value", "2"))
	e2e.WaitFor("the GitRepo at the pushed commit, Ready", func(g Gomega) {
		g.Expect(s.admin.Get(s.ctx, client.ObjectKeyFromObject(gr), gr)).To(Succeed())
		g.Expect(gr.Status.Commit).To(Equal(commit))
		g.Expect(meta.IsStatusConditionTrue(gr.Status.Conditions, fleet.ConditionReady)).To(BeTrue(), "%+v", gr.Status.Conditions)
		g.Expect(gr.Status.Display.ReadyBundleDeployments).To(Equal("1/1"))
	}, fleetCaseDeadline-time.Since(start), 250*time.Millisecond)
	GinkgoWriter.Printf("pushed: GitRepo Ready %s after the push\n", time.Since(start).Round(100*time.Millisecond))
}

// mapped: Fleet's bundle_namespace_mapping case. A GitRepo in a project
// namespace, labelled for a BundleNamespaceMapping there that maps its
// bundles to the Clusters of the Cluster's workspace, with a targetNamespace
// the project's GitRepoRestriction allows.
func (s *fleetCases) mapped() {
	const project, targetNS = "fleetcases-project1", "fleetcases-project1simpleapp"
	Expect(s.admin.Create(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: project}})).To(Succeed())
	DeferCleanup(func() {
		Expect(client.IgnoreNotFound(s.admin.Delete(s.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: project}}))).To(Succeed())
	})
	Expect(s.admin.Create(s.ctx, &fleet.GitRepoRestriction{ObjectMeta: metav1.ObjectMeta{Name: "restriction", Namespace: project},
		AllowedTargetNamespaces: []string{targetNS}})).To(Succeed())
	Expect(s.admin.Create(s.ctx, &fleet.BundleNamespaceMapping{ObjectMeta: metav1.ObjectMeta{Name: "mapping", Namespace: project},
		BundleSelector:    selector("team", "one"),
		NamespaceSelector: selector(corev1.LabelMetadataName, s.workspace)})).To(Succeed())
	start := time.Now()
	gr := s.gitRepo(project, "simpleapp", fleet.GitRepoSpec{Paths: []string{"mapped"}, TargetNamespace: targetNS,
		Targets: []fleet.GitTarget{{Name: "test", ClusterSelector: selector("env", "fleetcases")}}}, "team", "one")

	bundle := "simpleapp-mapped"
	var bd *fleet.BundleDeployment
	e2e.WaitFor("the mapped bundle's BundleDeployment, Ready", func(g Gomega) {
		list := &fleet.BundleDeploymentList{}
		g.Expect(s.admin.List(s.ctx, list, client.InNamespace(s.cluster.Cred.ClusterNamespace),
			client.MatchingLabels{fleet.BundleNameLabel: bundle, fleet.BundleNamespaceLabel: project})).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1), "no BundleDeployment of %s/%s yet", project, bundle)
		bd = &list.Items[0]
		g.Expect(summary.State(bd)).To(Equal(fleet.Ready), "%s\nagent log:\n%s", summary.Message(bd), s.cluster.Agent.Tail(4000))
	}, fleetCaseDeadline, 250*time.Millisecond)
	GinkgoWriter.Printf("mapped: Ready %s after the GitRepo\n", time.Since(start).Round(100*time.Millisecond))
	Expect(bd.Spec.Options.TargetNamespace).To(Equal(targetNS))
	Expect(configMap(s.cluster, targetNS, "mapped").Data).To(HaveKeyWithValue("value", "1"))
	s.gitRepoReady(gr, fleetCaseDeadline-time.Since(start))
}

// gitRepo creates a GitRepo of the cases' repository, polled at Fleet's
// default interval, and deletes it when the spec ends, waiting for its
// bundles to go.
func (s *fleetCases) gitRepo(ns, name string, spec fleet.GitRepoSpec, labels ...string) *fleet.GitRepo {
	GinkgoHelper()
	spec.Repo, spec.Branch = s.repoURL, "master"
	spec.PollingInterval = &metav1.Duration{Duration: fleet.DefaultPollingInterval}
	gr := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{}}, Spec: spec}
	for i := 0; i+1 < len(labels); i += 2 {
		gr.Labels[labels[i]] = labels[i+1]
	}
	Expect(s.admin.Create(s.ctx, gr)).To(Succeed())
	DeferCleanup(func() {
		Expect(client.IgnoreNotFound(s.admin.Delete(s.ctx, gr))).To(Succeed())
		e2e.WaitFor(fmt.Sprintf("the bundles of GitRepo %s/%s to be removed", ns, name), func(g Gomega) {
			list := &fleet.BundleList{}
			g.Expect(s.admin.List(s.ctx, list, client.InNamespace(ns), client.MatchingLabels{fleet.RepoLabel: name})).To(Succeed())
			g.Expect(list.Items).To(BeEmpty())
		}, time.Minute, 250*time.Millisecond)
	})
	return gr
}

// gitRepoReady waits for the GitRepo's Ready condition.
func (s *fleetCases) gitRepoReady(gr *fleet.GitRepo, timeout time.Duration) {
	GinkgoHelper()
	e2e.WaitFor(fmt.Sprintf("GitRepo %s/%s Ready", gr.Namespace, gr.Name), func(g Gomega) {
		g.Expect(s.admin.Get(s.ctx, client.ObjectKeyFromObject(gr), gr)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(gr.Status.Conditions, fleet.ConditionReady)).To(BeTrue(), "%+v", gr.Status.Conditions)
	}, max(timeout, time.Second), 250*time.Millisecond)
}

// push commits files in the clone and pushes them over HTTP; it returns the
// commit.
func (s *fleetCases) push(files map[string]string) string {
	GinkgoHelper()
	for name, content := range files {
		path := filepath.Join(s.clone, name)
		Expect(os.MkdirAll(filepath.Dir(path), 0o750)).To(Succeed())
		Expect(os.WriteFile(path, []byte(content), 0o600)).To(Succeed())
	}
	gitCmd(s.clone, "add", "-A")
	gitCmd(s.clone, "commit", "-q", "-m", "change")
	gitCmd(s.clone, "push", "-q", "origin", "HEAD:master")
	return gitCmd(s.clone, "rev-parse", "HEAD")
}

func caseConfigMap(name, value string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  value: %q\n", name, value)
}

// gitCmd runs the git CLI in dir and returns its trimmed output.
func gitCmd(dir string, args ...string) string {
	GinkgoHelper()
	cmd := exec.CommandContext(context.Background(), "git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com", "GIT_TERMINAL_PROMPT=0")
	out, err := cmd.CombinedOutput()
	Expect(err).NotTo(HaveOccurred(), "git %s: %s", strings.Join(args, " "), out)
	return strings.TrimSpace(string(out))
}
