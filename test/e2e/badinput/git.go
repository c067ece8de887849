package badinput

import (
	"path/filepath"
	"slices"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/bundlereader"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
)

// Where a git case's problem shows.
type level int

const (
	// gitLevel: the GitRepo's condition cond is False with the message, and
	// the GitRepo wrote no Bundle at all.
	gitLevel level = iota
	// bundleLevel: the Bundle is written, its Ready condition is False with
	// the message, and it targets no cluster.
	bundleLevel
	// agentLevel: the agent's BundleDeployment has Deployed False with the
	// message.
	agentLevel
	// warnLevel: nothing fails: the Bundle is written, the GitRepo is
	// Accepted and Ready, and its Warning condition says what fleet.yaml
	// holds that is ignored (as Fleet ignores it).
	warnLevel
)

// gitCase is one GitRepo over a repository holding one kind of bad input.
type gitCase struct {
	name  string            // GitRepo and repository name
	files map[string]string // committed files; chartRepoURL is replaced
	links map[string]string // committed symlinks: path to target
	// secret, when set, is created in the workspace before the GitRepo.
	secret *corev1.Secret
	// spec changes the default spec (this server, branch main, no targets).
	spec  func(*fleet.GitRepoSpec)
	level level
	cond  string   // gitLevel: Accepted or GitPolling
	msg   []string // what the message must say
	// bundle is the Bundle that reports the problem (bundleLevel,
	// agentLevel).
	bundle string
}

// chartRepoURL in a case's files stands for the chart repository's URL.
const chartRepoURL = "CHART_REPO_URL"

const cm = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: app}\ndata: {a: b}\n"

// app is a bundle directory "app" with a fleet.yaml and a manifest, plus
// more files (path, content, path, content...).
func app(fleetYAML string, more ...string) map[string]string {
	if fleetYAML == "" {
		fleetYAML = "defaultNamespace: bad\n"
	}
	files := map[string]string{"app/cm.yaml": cm, "app/fleet.yaml": fleetYAML}
	for i := 0; i+1 < len(more); i += 2 {
		files[more[i]] = more[i+1]
	}
	return files
}

func paths(p ...string) func(*fleet.GitRepoSpec) {
	return func(s *fleet.GitRepoSpec) { s.Paths = p }
}

func toAgent(s *fleet.GitRepoSpec) {
	s.Targets = []fleet.GitTarget{{Name: "agent", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": agentEnv}}}}
}

func chart(templates string) map[string]string {
	return map[string]string{
		"app/fleet.yaml":         "defaultNamespace: bad\n",
		"app/Chart.yaml":         "apiVersion: v2\nname: bad\nversion: 0.1.0\n",
		"app/templates/cm.yaml":  templates,
		"app/templates/NOTES.md": "notes",
	}
}

// binary is the start of a PNG file: no text, no manifest.
const binary = "\x89PNG\r\n\x1a\n\x00\xff\xfe\x00\x01\x80\x81"

// gitCases are the repositories of bad input, one per kind.
func (f *fixture) gitCases() []gitCase {
	return slices.Concat(f.fleetYAMLCases(), f.fileCases(), f.repositoryCases(), f.targetCases(), f.agentCases())
}

// fleetYAMLCases are bad fleet.yaml files.
func (f *fixture) fleetYAMLCases() []gitCase {
	return []gitCase{
		{name: "yaml-syntax", files: app("defaultNamespace: a\nhelm:\n  values: [\n"),
			cond: fleet.ConditionAccepted, msg: []string{"app/fleet.yaml: invalid YAML: line 3: did not find expected node content"}},
		{name: "yaml-tab", files: app("defaultNamespace: a\n\thelm: {}\n"),
			cond: fleet.ConditionAccepted, msg: []string{"app/fleet.yaml: invalid YAML", "tab character"}},
		{name: "not-a-mapping", files: app("- defaultNamespace: a\n"),
			cond: fleet.ConditionAccepted, msg: []string{"app/fleet.yaml: line 1: expected a mapping of fleet.yaml fields, got a list"}},
		{name: "unknown-field", files: app("defaultNamespace: lenient\nhelm:\n  chartt: x\nimageScans: [{image: x, tagName: t}]\n"),
			level: warnLevel, bundle: "unknown-field-app",
			msg: []string{`app/fleet.yaml: line 3: unknown field "helm.chartt" is ignored`, "app/fleet.yaml: line 4: imageScans is not implemented here and is ignored"}},
		{name: "ignored-field-type", files: app("defaultNamespace: a\ndeleteCRDResources: sometimes\n"),
			cond: fleet.ConditionAccepted, msg: []string{"app/fleet.yaml: line 2: field deleteCRDResources: cannot use a string as a boolean"}},
		{name: "downstream-resources-type", files: app("downstreamResources: {kind: Secret, name: s}\n"),
			cond: fleet.ConditionAccepted, msg: []string{"app/fleet.yaml: line 1: field downstreamResources: cannot use a object as a list"}},
		{name: "template-values-type", files: app("helm:\n  templateValues:\n    replicas: {from: cluster}\n"),
			cond: fleet.ConditionAccepted, msg: []string{"app/fleet.yaml: line 2: field helm.templateValues: cannot use a object as a string"}},
		{name: "template-values-list", files: app("helm:\n  templateValues: [a, b]\n"),
			cond: fleet.ConditionAccepted, msg: []string{"app/fleet.yaml: line 2: field helm.templateValues: cannot use a array as a mapping"}},
		{name: "override-targets-type", files: app("defaultNamespace: a\noverrideTargets: {clusterGroup: g}\n"),
			cond: fleet.ConditionAccepted, msg: []string{"app/fleet.yaml: line 2: field overrideTargets: cannot use a object as a list"}},
		{name: "override-selector-type", files: app("overrideTargets:\n- name: a\n  clusterSelector: [env]\n"),
			cond: fleet.ConditionAccepted, msg: []string{"app/fleet.yaml: line 3: field overrideTargets.clusterSelector: cannot use a array as a mapping"}},
		{name: "image-scan-interval", files: app("imageScans:\n- image: x\n  tagName: t\n  interval: soon\n"),
			cond: fleet.ConditionAccepted, msg: []string{"app/fleet.yaml: line 2: field imageScans:", "invalid duration"}},
		{name: "targets-type", files: app("targets: {clusterGroup: g}\n"),
			cond: fleet.ConditionAccepted, msg: []string{"app/fleet.yaml: line 1: field targets: cannot use a object as a list"}},
		{name: "targets-selector", files: app("targets:\n- clusterSelector:\n    matchExpressions: [{key: env, operator: Near}]\n"),
			cond: fleet.ConditionAccepted, msg: []string{"app/fleet.yaml: line 2: targets[0].clusterSelector is not a valid label selector", `"Near" is not a valid label selector operator`}},
		{name: "override-selector", files: app("overrideTargets:\n- name: a\n  clusterGroupSelector: {matchLabels: {\"bad key!\": x}}\n"),
			cond: fleet.ConditionAccepted, msg: []string{"app/fleet.yaml: line 3: overrideTargets[0].clusterGroupSelector is not a valid label selector"}},
		{name: "depends-on-nothing", files: app("dependsOn:\n- acceptedStates: [Ready]\n"),
			cond: fleet.ConditionAccepted, msg: []string{"app/fleet.yaml: line 2: dependsOn[0] must set name or selector"}},
		{name: "duplicate-key", files: app("defaultNamespace: a\ndefaultNamespace: b\n"),
			cond: fleet.ConditionAccepted, msg: []string{`app/fleet.yaml: line 2: key "defaultNamespace" is given twice (first at line 1)`}},
		{name: "values-type", files: app("helm:\n  values: [1, 2]\n"),
			cond: fleet.ConditionAccepted, msg: []string{"app/fleet.yaml: line 2: field helm.values: cannot use a array as a mapping"}},
		{name: "release-name", files: app("helm:\n  releaseName: " + strings.Repeat("r", 60) + "\n"),
			cond: fleet.ConditionAccepted, msg: []string{"app/fleet.yaml: line 2: helm.releaseName", "is longer than 53 characters"}},
		{name: "mode-enum", files: app("targetCustomizationMode: Sometimes\n"),
			cond: fleet.ConditionAccepted, msg: []string{`targetCustomizationMode "Sometimes": must be FirstMatch or AllMatches`}},
		{name: "bundle-name", files: app("name: My_App\n"),
			cond: fleet.ConditionAccepted, msg: []string{`app/fleet.yaml: name "My_App" is not a valid bundle name`}},
		{name: "two-fleet-yamls", files: app("defaultNamespace: a\n", "app/fleet.yml", "defaultNamespace: b\n"),
			cond: fleet.ConditionAccepted, msg: []string{"app has both fleet.yaml and fleet.yml: keep one"}},
		{name: "same-name", files: map[string]string{"a/fleet.yaml": "name: same\n", "a/cm.yaml": cm, "b/fleet.yaml": "name: same\n", "b/cm.yaml": cm},
			cond: fleet.ConditionAccepted, msg: []string{`bundle name "same" is used by both a and b`}},
		{name: "steal-bundle", files: app("name: healthy-plain\n"),
			cond: fleet.ConditionAccepted, msg: []string{"bundle healthy-plain already exists in namespace fleet-default and is not from this GitRepo"}},
		{name: "api-rejects", files: app("rolloutStrategy:\n  maxUnavailable: ten\n"),
			cond: fleet.ConditionAccepted, msg: []string{"bundle api-rejects-app was rejected by the API server", "spec.rolloutStrategy.maxUnavailable"}},
	}
}

// fileCases are bad files of the repository, and bad paths.
func (f *fixture) fileCases() []gitCase {
	return []gitCase{
		// The files of the repository.
		{name: "huge-file", files: app("", "app/blob.yaml", "# "+strings.Repeat("x", 3584*1024)),
			cond: fleet.ConditionAccepted, msg: []string{`bundle "huge-file-app" in app has 3.5 MiB`, "bundle too large for the API server's request limit"}},
		{name: "symlink-out", files: app(""), links: map[string]string{"app/leak.yaml": "/etc/passwd"},
			cond: fleet.ConditionAccepted, msg: []string{"symlink app/leak.yaml points outside the repository root"}},
		{name: "symlink-up", files: app(""), links: map[string]string{"app/up.yaml": "../../../../../../../../etc/passwd"},
			cond: fleet.ConditionAccepted, msg: []string{"symlink app/up.yaml points outside the repository root"}},
		{name: "symlink-broken", files: app(""), links: map[string]string{"app/gone.yaml": "nowhere.yaml"},
			cond: fleet.ConditionAccepted, msg: []string{"symlink app/gone.yaml is broken"}},
		{name: "values-file-missing", files: app("helm:\n  chart: ./chart\n  valuesFiles: [nope.yaml]\n"),
			cond: fleet.ConditionAccepted, msg: []string{"bundle app: helm.valuesFiles: app/nope.yaml does not exist"}},
		{name: "values-file-malformed", files: app("helm:\n  chart: ./chart\n  valuesFiles: [values.yaml]\n", "app/values.yaml", "replicas: [\n"),
			cond: fleet.ConditionAccepted, msg: []string{"helm.valuesFiles: values.yaml"}},
		{name: "values-file-outside", files: app("helm:\n  chart: ./chart\n  valuesFiles: [../../../etc/passwd]\n"),
			cond: fleet.ConditionAccepted, msg: []string{"helm.valuesFiles", "leaves the repository root"}},
		{name: "chart-missing", files: app("helm:\n  chart: ./chart\n"),
			cond: fleet.ConditionAccepted, msg: []string{"helm.chart: app/chart does not exist"}},
		{name: "chart-outside", files: app("helm:\n  chart: ../shared\n"),
			cond: fleet.ConditionAccepted, msg: []string{`helm.chart "../shared" is outside the bundle directory`}},
		{name: "remote-chart", files: app("helm:\n  repo: " + chartRepoURL + "\n  chart: nope\n"),
			cond: fleet.ConditionAccepted, msg: []string{`chart "nope" not found in`, "(charts: remote-web)"}},
		{name: "remote-version", files: app("helm:\n  repo: " + chartRepoURL + "\n  chart: remote-web\n  version: ^9.0.0\n"),
			cond: fleet.ConditionAccepted, msg: []string{"chart remote-web version ^9.0.0 not found in", "(available: 1.0.0)"}},
		{name: "remote-version-syntax", files: app("helm:\n  repo: " + chartRepoURL + "\n  chart: remote-web\n  version: \">>1\"\n"),
			cond: fleet.ConditionAccepted, msg: []string{`chart remote-web: version ">>1" is neither a version nor a semver range`}},

		// paths
		{name: "path-traversal", files: app(""), spec: paths("../../etc"),
			cond: fleet.ConditionAccepted, msg: []string{`path "../../etc" leaves the repository root`}},
		{name: "path-traversal-hidden", files: app(""), spec: paths("app/../../etc"),
			cond: fleet.ConditionAccepted, msg: []string{`path "app/../../etc" leaves the repository root`}},
		// As in Fleet, a leading "/" is the repository root, and a path that is
		// no directory of it adds nothing.
		{name: "path-absolute", files: app(""), spec: paths("/etc"),
			cond: fleet.ConditionAccepted, msg: []string{"no bundle found in /etc of commit"}},
		{name: "path-symlink-out", files: app(""), links: map[string]string{"escape": "/etc"}, spec: paths("escape"),
			cond: fleet.ConditionAccepted, msg: []string{`path "escape" leaves the repository root through a symlink`}},
		{name: "path-missing", files: app(""), spec: paths("nope", "nope/*"),
			cond: fleet.ConditionAccepted, msg: []string{"no bundle found in nope, nope/* of commit"}},
		{name: "path-file", files: app(""), spec: paths("app/cm.yaml"),
			cond: fleet.ConditionAccepted, msg: []string{"no bundle found in app/cm.yaml of commit"}},
		{name: "path-glob", files: app(""), spec: paths("app/[x"),
			cond: fleet.ConditionAccepted, msg: []string{`path "app/[x" is not a valid glob`}},
		{name: "path-without-bundle", files: app("", "docs/README.md", "no bundle here"), spec: paths("docs"),
			cond: fleet.ConditionAccepted, msg: []string{"no bundle found in docs of commit", "add a fleet.yaml or manifests"}},
	}
}

// repositoryCases are repositories that cannot be read.
func (f *fixture) repositoryCases() []gitCase {
	return []gitCase{
		// The repository itself.
		{name: "branch-missing", files: app(""), spec: func(s *fleet.GitRepoSpec) { s.Branch = "nope" },
			cond: fleet.ConditionAccepted, msg: []string{"branch nope not found in"}},
		{name: "revision-missing", files: app(""), spec: func(s *fleet.GitRepoSpec) { s.Revision = "v9.9.9" },
			cond: fleet.ConditionAccepted, msg: []string{"v9.9.9 not found in"}},
		{name: "repo-missing", spec: func(s *fleet.GitRepoSpec) { s.Repo = f.gitServer.RepoURL("no-such-repo") },
			cond: fleet.ConditionAccepted, msg: []string{"/no-such-repo not found: check spec.repo"}},
		{name: "repo-unreachable", spec: func(s *fleet.GitRepoSpec) { s.Repo = f.unreachableURL },
			cond: fleet.ConditionGitPolling, msg: []string{"/unreachable", "connection refused"}},
		{name: "repo-scheme", spec: func(s *fleet.GitRepoSpec) { s.Repo = "ftp://127.0.0.1/repo" },
			cond: fleet.ConditionAccepted, msg: []string{"unsupported repository URL ftp://127.0.0.1/repo"}},
		{name: "repo-ssh-no-secret", spec: func(s *fleet.GitRepoSpec) { s.Repo = "ssh://git@127.0.0.1:1/repo" },
			cond: fleet.ConditionAccepted, msg: []string{"is an SSH repository but the GitRepo has no clientSecretName"}},
		{name: "creds-wrong", files: app(""),
			secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds-wrong"}, Type: corev1.SecretTypeBasicAuth,
				Data: map[string][]byte{"username": []byte("git"), "password": []byte("wrong")}},
			spec: func(s *fleet.GitRepoSpec) {
				s.Repo = f.authServer.RepoURL("creds-wrong")
				s.ClientSecretName = "creds-wrong"
			},
			cond: fleet.ConditionAccepted, msg: []string{"authentication failed for", "check clientSecretName"}},
		{name: "creds-missing", files: app(""),
			spec: func(s *fleet.GitRepoSpec) {
				s.Repo = f.authServer.RepoURL("creds-missing")
				s.ClientSecretName = "missing"
			},
			cond: fleet.ConditionAccepted, msg: []string{"clientSecretName: Secret missing not found in namespace fleet-default"}},
		{name: "creds-shape", files: app(""),
			secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds-shape"}, Data: map[string][]byte{"token": []byte("x")}},
			spec: func(s *fleet.GitRepoSpec) {
				s.Repo = f.authServer.RepoURL("creds-shape")
				s.ClientSecretName = "creds-shape"
			},
			cond: fleet.ConditionAccepted, msg: []string{`Secret creds-shape has no "password" key`}},
		{name: "creds-ssh-for-http", files: app(""),
			secret: &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds-ssh"}, Type: corev1.SecretTypeSSHAuth,
				Data: map[string][]byte{corev1.SSHAuthPrivateKey: []byte("not a key")}},
			spec: func(s *fleet.GitRepoSpec) {
				s.Repo = f.authServer.RepoURL("creds-ssh-for-http")
				s.ClientSecretName = "creds-ssh"
			},
			cond: fleet.ConditionAccepted, msg: []string{"Secret creds-ssh holds an SSH key but"}},
	}
}

// targetCases are targets that match nothing or fail.
func (f *fixture) targetCases() []gitCase {
	return []gitCase{
		// Targets: the Bundle is written and says why it targets nothing.
		{name: "target-selector", files: app(""), level: bundleLevel, bundle: "target-selector-app",
			spec: func(s *fleet.GitRepoSpec) {
				s.Targets = []fleet.GitTarget{{Name: "broken", ClusterSelector: &metav1.LabelSelector{
					MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Near", Values: []string{"agent"}}}}}}
			},
			msg: []string{`invalid targets: target "broken"`, `"Near" is not a valid label selector operator`}},
		{name: "target-label-value", files: app(""), level: bundleLevel, bundle: "target-label-value-app",
			spec: func(s *fleet.GitRepoSpec) {
				s.Targets = []fleet.GitTarget{{Name: "spaces", ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "not a value"}}}}
			},
			msg: []string{`invalid targets: target "spaces"`, "not a value"}},
		// An invalid selector in fleet.yaml is refused when it is read, with
		// file and line (Fleet only finds it when targeting the Bundle).
		{name: "customization-selector", spec: toAgent,
			files: app("targetCustomizations:\n- name: broken\n  clusterSelector:\n    matchExpressions: [{key: env, operator: Near}]\n"),
			cond:  fleet.ConditionAccepted,
			msg:   []string{"app/fleet.yaml: line 3: targetCustomizations[0].clusterSelector is not a valid label selector", `"Near" is not a valid label selector operator`}},
		{name: "values-template", level: bundleLevel, bundle: "values-template-app", spec: toAgent,
			files: app("helm:\n  values:\n    cluster: ${ .ClusterName | nosuchfunc }\n"),
			msg:   []string{"helm values", "nosuchfunc"}},

		// A template that fails for every cluster it targets (none has the
		// label): each cluster is named, nothing is deployed anywhere.
		{name: "values-template-every-cluster", level: bundleLevel, bundle: "values-template-every-cluster-app",
			spec: func(s *fleet.GitRepoSpec) {
				s.Targets = []fleet.GitTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
					{Key: "env", Operator: metav1.LabelSelectorOpIn, Values: []string{"healthy", agentEnv}}}}}}
			},
			files: app("defaultNamespace: bad\nhelm:\n  values:\n    region: ${ .ClusterLabels.region }\n"),
			msg: []string{"cluster fleet-default/healthy-1: helm values", "cluster fleet-default/healthy-2: helm values",
				"<.ClusterLabels.region>: map has no entry for key \"region\""}},
	}
}

// agentCases are rendered by the agent, which reports them.
func (f *fixture) agentCases() []gitCase {
	return []gitCase{
		// Rendered by the agent.
		{name: "chart-parse-error", level: agentLevel, bundle: "chart-parse-error-app", spec: toAgent,
			files: chart("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Values.name | nosuchfunc }}\n"),
			msg:   []string{`function "nosuchfunc" not defined`}},
		{name: "chart-render-error", level: agentLevel, bundle: "chart-render-error-app", spec: toAgent,
			files: chart("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ required \"value name is required\" .Values.name }}\n"),
			msg:   []string{"value name is required"}},
		{name: "chart-no-chart-yaml", level: agentLevel, bundle: "chart-no-chart-yaml-app", spec: toAgent,
			files: app("helm:\n  chart: ./chart\n", "app/chart/templates/cm.yaml", cm),
			msg:   []string{`helm.chart "./chart": the bundle has no chart there (no chart/Chart.yaml)`}},
		{name: "kustomize-missing-file", level: agentLevel, bundle: "kustomize-missing-file-app", spec: toAgent,
			files: map[string]string{"app/fleet.yaml": "defaultNamespace: bad\n", "app/kustomization.yaml": "resources: [cm.yaml, missing.yaml]\n", "app/cm.yaml": cm},
			msg:   []string{"missing.yaml"}},
		{name: "manifest-malformed", level: agentLevel, bundle: "manifest-malformed-app", spec: toAgent,
			files: app("defaultNamespace: bad\n", "app/broken.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: broken\n"),
			msg:   []string{"broken.yaml"}},
		{name: "manifest-binary", level: agentLevel, bundle: "manifest-binary-app", spec: toAgent,
			files: app("defaultNamespace: bad\n", "app/garbage.yaml", binary),
			msg:   []string{"garbage.yaml"}},
	}
}

func (f *fixture) gitEntries() []TableEntry {
	cases := f.gitCases()
	out := make([]TableEntry, 0, len(cases))
	for _, c := range cases {
		out = append(out, Entry(c.name+": "+strings.Join(c.msg, " ... "), c))
	}
	return out
}

func (f *fixture) gitSurface() {
	BeforeAll(func() {
		f.authServer = gittest.NewServer(f.gitRoot)
		f.authServer.SetBasicAuth("git", "pa55")
		DeferCleanup(f.authServer.Close)
		f.unreachableURL = "http://" + freeAddr() + "/unreachable"

		for _, c := range f.gitCases() {
			if c.files != nil || c.links != nil {
				repo, err := gittest.NewRepo(filepath.Join(f.gitRoot, c.name), "main")
				must(err)
				writeTree(repo.Dir, nil, c.links)
				files := map[string]string{}
				for name, content := range c.files {
					files[name] = strings.ReplaceAll(content, chartRepoURL, f.chartRepo.URL)
				}
				_, err = repo.Commit("bad input", files)
				must(err)
			}
			if c.secret != nil {
				s := c.secret.DeepCopy()
				s.Namespace = ws
				Expect(f.admin.Create(f.ctx, s)).To(Succeed())
			}
			spec := fleet.GitRepoSpec{Repo: f.gitServer.RepoURL(c.name), Branch: "main", PollingInterval: every(5 * time.Second)}
			if c.spec != nil {
				c.spec(&spec)
			}
			Expect(f.admin.Create(f.ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: c.name, Namespace: ws}, Spec: spec})).To(Succeed())
		}
	})

	DescribeTable("a GitRepo whose repository holds bad input", func(c gitCase) {
		switch c.level {
		case gitLevel:
			Eventually(func(g Gomega) {
				gr := f.getGitRepo(ws, c.name)
				cond := conditionOf(gr.Status.Conditions, c.cond)
				g.Expect(cond.Status).To(Equal(metav1.ConditionFalse), "%s: %+v", c.cond, gr.Status.Conditions)
				g.Expect(cond.Message).To(containsAll(c.msg...))
				ready := conditionOf(gr.Status.Conditions, fleet.ConditionReady)
				g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(ready.Message).To(Equal(cond.Message))
				g.Expect(gr.Status.Display.Error).To(BeTrue())
			}, timeout, poll).Should(Succeed())
			By("The GitRepo says: " + conditionOf(f.getGitRepo(ws, c.name).Status.Conditions, c.cond).Message)
			Expect(f.bundlesOf(ws, c.name)).To(BeEmpty(), "nothing is written from a repository that cannot be read whole")
		case bundleLevel:
			Eventually(func(g Gomega) {
				b := &fleet.Bundle{}
				g.Expect(f.admin.Get(f.ctx, types.NamespacedName{Namespace: ws, Name: c.bundle}, b)).To(Succeed())
				ready := conditionOf(b.Status.Conditions, fleet.ConditionReady)
				g.Expect(ready.Status).To(Equal(metav1.ConditionFalse), "%+v", b.Status)
				g.Expect(ready.Message).To(containsAll(c.msg...))
				gr := f.getGitRepo(ws, c.name)
				g.Expect(conditionOf(gr.Status.Conditions, fleet.ConditionAccepted).Status).To(Equal(metav1.ConditionTrue))
				ready = conditionOf(gr.Status.Conditions, fleet.ConditionReady)
				g.Expect(ready.Status).To(Equal(metav1.ConditionFalse), "the GitRepo must show its Bundle's error: %+v", gr.Status.Conditions)
				g.Expect(ready.Message).To(containsAll(append([]string{"Bundle " + c.bundle}, c.msg...)...))
			}, timeout, poll).Should(Succeed())
			By("The GitRepo says: " + conditionOf(f.getGitRepo(ws, c.name).Status.Conditions, fleet.ConditionReady).Message)
			Expect(f.deploymentsOf(c.bundle)).To(BeEmpty())
		case agentLevel:
			Eventually(func(g Gomega) {
				bd := f.deploymentsOf(c.bundle)[f.agentCluster.Name]
				g.Expect(bd).NotTo(BeNil(), "no BundleDeployment yet")
				deployed := conditionOf(bd.Status.Conditions, fleet.ConditionDeployed)
				g.Expect(deployed.Status).To(Equal(metav1.ConditionFalse), "%+v\nagent log:\n%s", bd.Status, f.agent.Tail(4000))
				g.Expect(deployed.Message).To(containsAll(c.msg...))
				g.Expect(bd.Status.Display.State).To(Equal(string(fleet.ErrApplied)))
				ready := conditionOf(f.getGitRepo(ws, c.name).Status.Conditions, fleet.ConditionReady)
				g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(ready.Message).To(containsAll("ErrApplied", "Bundle "+c.bundle, c.msg[0]))
			}, timeout, poll).Should(Succeed())
			bd := f.deploymentsOf(c.bundle)[f.agentCluster.Name]
			By("The agent says: " + conditionOf(bd.Status.Conditions, fleet.ConditionDeployed).Message)
			By("The GitRepo says: " + conditionOf(f.getGitRepo(ws, c.name).Status.Conditions, fleet.ConditionReady).Message)
			Expect(f.deploymentsOf(c.bundle)).To(HaveLen(1), "only the agent's cluster is targeted")
			err := f.local.Get(f.ctx, types.NamespacedName{Namespace: "bad", Name: "app"}, &corev1.ConfigMap{})
			Expect(apierrors.IsNotFound(err)).To(BeTrue(), "nothing of a bundle that failed to render was applied: %v", err)
		case warnLevel:
			Eventually(func(g Gomega) {
				gr := f.getGitRepo(ws, c.name)
				warning := conditionOf(gr.Status.Conditions, fleet.ConditionWarning)
				g.Expect(warning.Status).To(Equal(metav1.ConditionTrue), "%+v", gr.Status.Conditions)
				g.Expect(warning.Reason).To(Equal(fleet.ReasonIgnoredFields))
				g.Expect(warning.Message).To(containsAll(c.msg...))
				g.Expect(conditionOf(gr.Status.Conditions, fleet.ConditionAccepted).Status).To(Equal(metav1.ConditionTrue))
				g.Expect(conditionOf(gr.Status.Conditions, fleet.ConditionReady).Status).To(Equal(metav1.ConditionTrue), "%+v", gr.Status.Conditions)
				g.Expect(gr.Status.Display.Error).To(BeFalse())
				g.Expect(f.bundlesOf(ws, c.name)).To(HaveKey(c.bundle))
			}, timeout, poll).Should(Succeed())
			By("The GitRepo warns: " + conditionOf(f.getGitRepo(ws, c.name).Status.Conditions, fleet.ConditionWarning).Message)
		}
		f.expectUndisturbed()
	}, f.gitEntries())

	It("ships binary files that are not manifests gzipped, and the agent deploys the rest", func() {
		repo, err := gittest.NewRepo(filepath.Join(f.gitRoot, "binary-file"), "main")
		must(err)
		_, err = repo.Commit("binary", app("defaultNamespace: binary\n", "app/logo.png", binary))
		must(err)
		spec := fleet.GitRepoSpec{Repo: f.gitServer.RepoURL("binary-file"), Branch: "main", PollingInterval: every(5 * time.Second)}
		toAgent(&spec)
		Expect(f.admin.Create(f.ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "binary-file", Namespace: ws}, Spec: spec})).To(Succeed())
		Eventually(func(g Gomega) {
			bd := f.deploymentsOf("binary-file-app")[f.agentCluster.Name]
			g.Expect(bd).NotTo(BeNil())
			g.Expect(bd.Status.Display.State).To(Equal(string(fleet.Ready)), "%+v\nagent log:\n%s", bd.Status, f.agent.Tail(4000))
		}, timeout, poll).Should(Succeed())
		b := f.bundlesOf(ws, "binary-file")["binary-file-app"]
		var logo fleet.BundleResource
		for _, r := range b.Spec.Resources {
			if r.Name == "logo.png" {
				logo = r
			}
		}
		Expect(logo.Encoding).To(Equal(bundlereader.EncodingBase64Gz))
		data, err := bundlereader.DecodeResource(logo)
		Expect(err).NotTo(HaveOccurred())
		Expect(string(data)).To(Equal(binary))
		Expect(f.local.Get(f.ctx, types.NamespacedName{Namespace: "binary", Name: "app"}, &corev1.ConfigMap{})).To(Succeed())
		f.expectUndisturbed()
	})
}
