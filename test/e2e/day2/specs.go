package day2

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"os"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/diagnose"
	"github.com/gitfleet/fleet/internal/preview"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// healthySteps deploys the GitRepo and runs analyze on the healthy fleet.
func healthySteps(f *fixture) {
	It("deploys the repository to both clusters, and analyze stays silent on the healthy fleet", func() {
		Expect(f.admin.Create(f.ctx, f.gitRepoObject())).To(Succeed())
		f.waitState(f.prod, appBundle, fleet.Ready, 90*time.Second)
		f.waitState(f.dev, appBundle, fleet.Ready, 90*time.Second)
		Expect(f.configMap(f.prod, appNS, "settings").Data).To(HaveKeyWithValue("tier", "gold"))
		Expect(f.configMap(f.dev, appNS, "settings").Data).To(HaveKeyWithValue("tier", "bronze"))

		a, code := f.analyze("-k", f.kubeconfig)
		Expect(a.Findings).To(BeEmpty(), "a healthy fleet has no findings")
		Expect(a.NotRun).To(BeEmpty(), "an admin may read everything")
		Expect(code).To(Equal(0))
		r := f.fleetCmd("analyze", "-k", f.kubeconfig)
		Expect(r.code).To(Equal(0))
		// The two clusters, and the manager's own local cluster.
		clusters := &fleet.ClusterList{}
		Expect(f.admin.List(f.ctx, clusters)).To(Succeed())
		Expect(clusters.Items).To(HaveLen(3))
		Expect(r.stdout).To(ContainSubstring("No findings: 3 clusters"))
	})
}

// previewSteps previews a commit that changes the value of env=prod.
func previewSteps(f *fixture) {
	It("previews a commit changing the prod value: exactly the prod cluster and the field, as the manager then writes it", func() {
		devBefore := f.bd(f.dev, appBundle).Spec.DeploymentID
		prodBefore := f.bd(f.prod, appBundle).Spec.DeploymentID
		from := f.commits[len(f.commits)-1]
		to := f.commit("platinum for prod", map[string]string{"app/fleet.yaml": appFleetYAML("platinum", "")})
		// The GitRepo's targets are read from the manager.
		args := []string{"preview", "--repo", f.repo.Dir, "--name", gitRepo, "-n", ws, "-k", f.kubeconfig, "--from", from, "--to", to}
		r := f.fleetCmd(append(args, "-o", "json")...)
		Expect(r.code).To(Equal(2), "the exit code says something changes")
		var res preview.Result
		Expect(json.Unmarshal([]byte(r.stdout), &res)).To(Succeed())
		Expect(res.Errors).To(BeEmpty())
		Expect(res.Clusters).To(HaveLen(1), "only the prod cluster changes")
		c := res.Clusters[0]
		Expect(c.Cluster).To(Equal(ws + "/" + f.prod.Cluster.Name))
		Expect(c.Bundles).To(HaveLen(1))
		b := c.Bundles[0]
		Expect(b.Bundle).To(HaveSuffix(appBundle))
		Expect(b.Change).To(Equal(preview.Changed))
		Expect(b.DeploymentID).NotTo(Equal(prodBefore))
		Expect(b.Objects).To(HaveLen(1))
		Expect(b.Objects[0].Object).To(ContainSubstring(appNS + "/settings"))
		Expect(b.Objects[0].Fields).To(ConsistOf(preview.FieldChange{Path: "/data/tier", From: "gold", To: "platinum"}))

		By("the manager writes, for the prod cluster only, the deployment the preview computed")
		e2e.WaitFor("the prod cluster's BundleDeployment to have the previewed deploymentID", func(g Gomega) {
			g.Expect(f.bd(f.prod, appBundle).Spec.DeploymentID).To(Equal(b.DeploymentID))
		}, 60*time.Second, 250*time.Millisecond)
		f.waitState(f.prod, appBundle, fleet.Ready, 60*time.Second)
		Expect(f.configMap(f.prod, appNS, "settings").Data).To(HaveKeyWithValue("tier", "platinum"))
		e2e.HoldsFor("the dev cluster's BundleDeployment to keep its deploymentID", func(g Gomega) {
			g.Expect(f.bd(f.dev, appBundle).Spec.DeploymentID).To(Equal(devBefore))
		}, 3*time.Second, 250*time.Millisecond)

		By("markdown, for a pull request comment, names the prod cluster and the field only")
		md := f.fleetCmd(append(args, "-o", "markdown")...)
		Expect(md.code).To(Equal(2))
		Expect(md.stdout).To(ContainSubstring(f.prod.Cluster.Name))
		Expect(md.stdout).NotTo(ContainSubstring(f.dev.Cluster.Name))
		Expect(md.stdout).To(ContainSubstring("/data/tier"))

		By("a revision against itself changes nothing: exit code 0")
		// A relative --targets-file is the caller's, not the checkout's.
		same := f.fleetCmd("preview", "--repo", f.repo.Dir, "--name", gitRepo, "-n", ws, "--targets-file", "targets.yaml",
			"-k", f.kubeconfig, "--from", to, "--to", to)
		Expect(same.code).To(Equal(0), same.stderr)

		By("a revision that does not exist is named, exit code 1")
		bad := f.fleetCmd("preview", "--repo", f.repo.Dir, "--name", gitRepo, "-n", ws, "-k", f.kubeconfig, "--from", "no-such-revision", "--to", to)
		Expect(bad.code).To(Equal(1))
		Expect(bad.stderr).To(ContainSubstring("no-such-revision"))
	})
}

// bundleDiffSteps drifts an object on the dev cluster and ignores the
// drift with the comparePatches bundlediff prints.
func bundleDiffSteps(f *fixture) {
	It("shows a drifted object in bundlediff, and its comparePatches, pushed, make the deployment Ready", func() {
		cm := f.configMap(f.dev, appNS, "settings")
		cm.Data["tier"] = "tampered"
		Expect(f.dev.Local.Update(f.ctx, cm)).To(Succeed())
		f.waitState(f.dev, appBundle, fleet.Modified, 60*time.Second)

		r := f.fleetCmd("bundlediff", "-k", f.kubeconfig, "-n", ws, "-b", appBundle)
		Expect(r.code).To(Equal(0), r.stderr)
		Expect(r.stdout).To(ContainSubstring("# BundleDeployment " + f.dev.Cred.ClusterNamespace + "/" + appBundle))
		Expect(r.stdout).To(ContainSubstring(`/data/tier: the bundle has "bronze"`))
		Expect(r.stdout).NotTo(ContainSubstring(f.prod.Cred.ClusterNamespace), "the prod cluster did not drift")

		By("analyze names the drift, and the bundlediff to run")
		a, code := f.analyze("-k", f.kubeconfig)
		Expect(code).To(Equal(1))
		Expect(finding(a, diagnose.CheckModified, bdObject(f.dev, appBundle)).Action).To(ContainSubstring("fleet bundlediff"))
		Expect(a.Findings).To(HaveLen(1), "nothing else is wrong: %v", keys(a.Findings))

		By("the comparePatches it prints, added to the fleet.yaml and pushed, make the deployment Ready, the drift left alone")
		y := f.fleetCmd("bundlediff", "-k", f.kubeconfig, "-n", ws, "-b", appBundle, "--fleet-yaml")
		Expect(y.code).To(Equal(0), y.stderr)
		Expect(y.stdout).To(HavePrefix("# fleet.yaml of bundle " + ws + "/" + appBundle + "\n"))
		var fragment struct {
			Diff fleet.DiffOptions `json:"diff"`
		}
		Expect(yaml.UnmarshalStrict([]byte(y.stdout), &fragment)).To(Succeed())
		Expect(fragment.Diff.ComparePatches).To(HaveLen(1))
		p := fragment.Diff.ComparePatches[0]
		Expect([]string{p.APIVersion, p.Kind, p.Namespace, p.Name}).To(Equal([]string{"v1", "ConfigMap", appNS, "settings"}))
		Expect(p.JSONPointers).To(Equal([]string{"/data/tier"}))
		sha := f.commit("ignore the tier's drift", map[string]string{"app/fleet.yaml": appFleetYAML("platinum", y.stdout)})
		e2e.WaitFor("the dev cluster's BundleDeployment to carry the comparePatches", func(g Gomega) {
			gr := &fleet.GitRepo{}
			g.Expect(f.admin.Get(f.ctx, types.NamespacedName{Namespace: ws, Name: gitRepo}, gr)).To(Succeed())
			g.Expect(gr.Status.Commit).To(Equal(sha), "the GitRepo's commit; conditions: %v", gr.Status.Conditions)
			b := &fleet.Bundle{}
			g.Expect(f.admin.Get(f.ctx, types.NamespacedName{Namespace: ws, Name: appBundle}, b)).To(Succeed())
			g.Expect(b.Spec.Diff).NotTo(BeNil(), "the Bundle's diff")
			bd := f.bd(f.dev, appBundle)
			g.Expect(bd.Spec.Options.Diff).NotTo(BeNil())
			g.Expect(bd.Spec.Options.Diff.ComparePatches).To(HaveLen(1))
		}, 60*time.Second, 250*time.Millisecond)
		f.waitState(f.dev, appBundle, fleet.Ready, 60*time.Second)
		Expect(f.configMap(f.dev, appNS, "settings").Data).To(HaveKeyWithValue("tier", "tampered"), "ignored, not corrected")
		f.waitState(f.prod, appBundle, fleet.Ready, 60*time.Second)

		none := f.fleetCmd("bundlediff", "-k", f.kubeconfig, "-n", ws, "-b", appBundle)
		Expect(none.code).To(Equal(1))
		Expect(none.stderr).To(ContainSubstring("no drift reported"))
	})
}

// deploySteps deploys a bundle from the command line into the prod
// cluster's downstream cluster.
func deploySteps(f *fixture) {
	It("fleet deploy installs one bundle for a cluster into its downstream cluster, and --dry-run only prints", func() {
		f.writeFile("debug/Chart.yaml", "apiVersion: v2\nname: debug\nversion: 0.1.0\n")
		f.writeFile("debug/templates/cm.yaml", "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: debug\ndata:\n  tier: {{ .Values.tier | quote }}\n")
		f.writeFile("debug/fleet.yaml", "defaultNamespace: day2-debug\nhelm:\n  values:\n    tier: bronze\n"+
			"targetCustomizations:\n- name: prod\n  clusterSelector: {matchLabels: {env: prod}}\n  helm: {values: {tier: gold}}\n")
		args := make([]string, 0, 13) // and --dry-run
		args = append(args, "deploy", "debug", "-n", ws, "--targets-file", f.targets, "-k", f.kubeconfig, "-N", f.prod.Cluster.Name,
			"--downstream-kubeconfig", f.prod.Downstream.Kubeconfig)

		dry := f.fleetCmd(append(args, "--dry-run")...)
		Expect(dry.code).To(Equal(0), dry.stderr)
		Expect(dry.stdout).To(ContainSubstring("name: debug"))
		Expect(dry.stdout).To(ContainSubstring("tier: gold"), "the prod cluster's customization")
		err := f.prod.Local.Get(f.ctx, types.NamespacedName{Namespace: "day2-debug", Name: "debug"}, &corev1.ConfigMap{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "--dry-run creates nothing: %v", err)

		r := f.fleetCmd(args...)
		Expect(r.code).To(Equal(0), r.stderr)
		Expect(r.stdout).To(ContainSubstring("deployed release"))
		Expect(f.configMap(f.prod, "day2-debug", "debug").Data).To(HaveKeyWithValue("tier", "gold"))
		err = f.dev.Local.Get(f.ctx, types.NamespacedName{Namespace: "day2-debug", Name: "debug"}, &corev1.ConfigMap{})
		Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the dev cluster is not touched: %v", err)
	})
}

// cleanupSteps registers a third agent, deletes its Cluster, and cleans
// up the orphaned registration.
func cleanupSteps(f *fixture) {
	It("cleanup clusterregistration deletes an orphaned registration and keeps the live ones", func() {
		gone := e2e.Join(f.ctx, e2e.JoinInput{Upstream: f.prod.Upstream, Downstream: f.prod.Downstream, Admin: f.admin, LogDir: f.prod.LogDir,
			SystemNamespace: "day2-gone", ConfigArgs: []string{"--client-id", "day2-gone", "-l", "env=gone"},
			AgentArgs: []string{"--checkin-interval", "5s"}}, 90*time.Second)
		gone.StopAgents()
		Expect(f.admin.Delete(f.ctx, gone.Cluster)).To(Succeed())
		e2e.WaitFor("the deleted Cluster to be gone", func(g Gomega) {
			err := f.admin.Get(f.ctx, client.ObjectKeyFromObject(gone.Cluster), &fleet.Cluster{})
			g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "%v", err)
		}, 60*time.Second, 250*time.Millisecond)
		orphans := f.registrationsOf(gone.Cluster.Name)
		Expect(orphans).NotTo(BeEmpty(), "the registration outlives its Cluster")
		live := append(f.registrationsOf(f.prod.Cluster.Name), f.registrationsOf(f.dev.Cluster.Name)...)
		Expect(live).NotTo(BeEmpty())

		dry := f.fleetCmd("cleanup", "clusterregistration", "-k", f.kubeconfig, "--dry-run")
		Expect(dry.code).To(Equal(0), dry.stderr)
		for _, name := range orphans {
			Expect(dry.stdout).To(ContainSubstring("would delete ClusterRegistration " + ws + "/" + name + ": orphaned"))
		}
		Expect(f.registrationsOf(gone.Cluster.Name)).To(Equal(orphans), "--dry-run deletes nothing")

		r := f.fleetCmd("cleanup", "clusterregistration", "-k", f.kubeconfig)
		Expect(r.code).To(Equal(0), r.stderr)
		for _, name := range orphans {
			Expect(r.stdout).To(ContainSubstring("deleted ClusterRegistration " + ws + "/" + name + ": orphaned"))
		}
		e2e.WaitFor("the orphaned registrations to be gone", func(g Gomega) {
			g.Expect(f.registrationsOf(gone.Cluster.Name)).To(BeEmpty())
		}, 30*time.Second, 250*time.Millisecond)
		Expect(append(f.registrationsOf(f.prod.Cluster.Name), f.registrationsOf(f.dev.Cluster.Name)...)).To(ConsistOf(live),
			"the registrations the live agents' credentials hang on are kept")
	})
}

// registrationsOf names the granted ClusterRegistrations of a cluster.
func (f *fixture) registrationsOf(cluster string) []string {
	GinkgoHelper()
	regs := &fleet.ClusterRegistrationList{}
	Expect(f.admin.List(f.ctx, regs, client.InNamespace(ws))).To(Succeed())
	var out []string
	for _, r := range regs.Items {
		if r.Status.Granted && r.Status.ClusterName == cluster && r.DeletionTimestamp == nil {
			out = append(out, r.Name)
		}
	}
	return out
}

// publicKeys are the keys of the manager's Secrets whose values name
// objects or addresses that Clusters, tokens and registrations show as
// well: finding them in a dump says nothing about Secret data.
var publicKeys = map[string]bool{"apiServerURL": true, "tokenName": true, "clusterNamespace": true,
	"clusterName": true, "namespace": true, "systemRegistrationNamespace": true, "clientID": true}

// plantedProblemSteps plants problems on the live fleet and finds each with
// analyze, live and on a dump archive.
func plantedProblemSteps(f *fixture) {
	It("analyze finds an Offline agent, a failed deployment and an expiring token; a dump holds no Secret data and gives the same", func() {
		By("a token that expires within the warning window")
		tok := f.fleetCmd("install", "agent-token", "-k", f.kubeconfig, "--name", "day2-expiring", "--ttl", "2h")
		Expect(tok.code).To(Equal(0), tok.stderr)
		By("a bundle the agent cannot deploy: a kind no cluster serves")
		f.commit("a broken bundle", map[string]string{
			"broken/fleet.yaml": "defaultNamespace: day2-broken\n",
			"broken/thing.yaml": "apiVersion: example.invalid/v1\nkind: NoSuchKind\nmetadata: {name: thing}\n",
		})
		broken := gitRepo + "-broken"
		f.waitState(f.prod, broken, fleet.ErrApplied, 90*time.Second)
		f.waitState(f.dev, broken, fleet.ErrApplied, 90*time.Second)
		By("the dev cluster's agent stopped until its Cluster is Offline")
		f.dev.StopAgents()
		e2e.WaitFor("the dev Cluster to be Offline", func(g Gomega) {
			c := &fleet.Cluster{}
			g.Expect(f.admin.Get(f.ctx, client.ObjectKeyFromObject(f.dev.Cluster), c)).To(Succeed())
			g.Expect(c.Status.Display.State).To(Equal(fleet.ClusterStateOffline))
		}, 60*time.Second, 250*time.Millisecond)

		By("fleet analyze, live and on a dump (fleet dump), finds the same")
		live, _, archive := f.liveAndDump()
		Expect(finding(live, diagnose.CheckAgentOffline, clusterObject(f.dev)).Severity).To(Equal(diagnose.Critical))
		Expect(finding(live, diagnose.CheckDeployFailed, bdObject(f.prod, broken)).Message).To(ContainSubstring("NoSuchKind"))
		finding(live, diagnose.CheckDeployFailed, bdObject(f.dev, broken))
		Expect(finding(live, diagnose.CheckTokenExpiring, "ClusterRegistrationToken "+ws+"/day2-expiring").Severity).To(Equal(diagnose.Warning))
		for _, fd := range live.Findings {
			Expect(fd.Object).NotTo(Equal(clusterObject(f.prod)), "the prod cluster is healthy: %s", fd)
		}
		Expect(live.Findings[0].Severity).To(Equal(diagnose.Critical), "most urgent first")

		By("fleet dump: no Secret's data in the archive")
		content := f.archiveContent(archive)
		secrets := &corev1.SecretList{}
		Expect(f.admin.List(f.ctx, secrets)).To(Succeed())
		checked := 0
		for _, s := range secrets.Items {
			for k, v := range s.Data {
				if len(v) < 16 {
					continue // too short to be told apart from other text
				}
				if publicKeys[k] {
					continue // a name or an address, not a credential: other objects show it too
				}
				checked++
				Expect(bytes.Contains(content, v)).To(BeFalse(), "the archive holds the data %s of Secret %s/%s", k, s.Namespace, s.Name)
				Expect(bytes.Contains(content, []byte(base64.StdEncoding.EncodeToString(v)))).To(BeFalse(),
					"the archive holds the data %s of Secret %s/%s, base64-encoded", k, s.Namespace, s.Name)
			}
		}
		Expect(checked).To(BeNumerically(">", 0), "the manager's cluster holds credentials to look for")
	})
}

// archiveContent is every file of a gzipped tar, concatenated.
func (f *fixture) archiveContent(name string) []byte {
	GinkgoHelper()
	data, err := os.ReadFile(f.dir + "/" + name)
	Expect(err).NotTo(HaveOccurred())
	zr, err := gzip.NewReader(bytes.NewReader(data))
	Expect(err).NotTo(HaveOccurred())
	tr := tar.NewReader(zr)
	var all bytes.Buffer
	files := 0
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		Expect(err).NotTo(HaveOccurred())
		Expect(strings.ToLower(h.Name)).NotTo(ContainSubstring("secret"), "no Secrets in the archive")
		_, err = io.Copy(&all, tr)
		Expect(err).NotTo(HaveOccurred())
		files++
	}
	Expect(files).To(BeNumerically(">", 0))
	return all.Bytes()
}
