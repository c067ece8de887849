package security_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/test/chartrepo"
	"github.com/gitfleet/fleet/test/framework"
)

const configMap = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\ndata:\n  k: v\n"

// gitRepoAt creates a repository served by the suite's git server with
// files committed on main, and returns it with its URL.
func gitRepoAt(name string, files map[string]string) (*gittest.Repo, string) {
	r, err := gittest.NewRepo(filepath.Join(env.GitRoot, name), "main")
	Expect(err).NotTo(HaveOccurred())
	_, err = r.Commit("init", files)
	Expect(err).NotTo(HaveOccurred())
	return r, env.GitURL + "/" + name
}

// gitRepoCondition waits until the GitRepo's condition t has status and
// reason, and returns it.
func gitRepoCondition(c client.Client, ns, name, t string, status metav1.ConditionStatus, reason string, within time.Duration) metav1.Condition {
	var found metav1.Condition
	Eventually(func(g Gomega) {
		gr := &fleet.GitRepo{}
		g.Expect(c.Get(env.Ctx, client.ObjectKey{Namespace: ns, Name: name}, gr)).To(Succeed())
		cond := meta.FindStatusCondition(gr.Status.Conditions, t)
		g.Expect(cond).NotTo(BeNil(), "no %s condition yet: %+v", t, gr.Status.Conditions)
		g.Expect(cond.Status).To(Equal(status), "%s: %s", cond.Reason, cond.Message)
		g.Expect(cond.Reason).To(Equal(reason), cond.Message)
		g.Expect(cond.ObservedGeneration).To(Equal(gr.Generation))
		found = *cond
	}).WithTimeout(within).WithPolling(200 * time.Millisecond).Should(Succeed())
	return found
}

// bundlesOf lists the Bundles of a GitRepo (as the admin, to check).
func bundlesOf(ns, repo string) []fleet.Bundle {
	list := &fleet.BundleList{}
	Expect(env.Admin.List(env.Ctx, list, client.InNamespace(ns), client.MatchingLabels{fleet.RepoLabel: repo})).To(Succeed())
	return list.Items
}

func pollEvery(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }

var _ = Describe("GitRepo and repository holes", func() {
	restrictionSpecs()
	availabilitySpecs()
	credentialAndStallSpecs()
})

// restrictionSpecs: holes 2 and 3, GitRepoRestrictions and local
// repository paths.
func restrictionSpecs() {
	It("2: a GitRepo that breaks its namespace's GitRepoRestriction is neither fetched nor deployed", func() {
		ctx, ns := env.Ctx, "tenant-restricted"
		tenant, err := framework.TenantClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), ns)
		Expect(err).NotTo(HaveOccurred())
		_, allowedURL := gitRepoAt("restricted-allowed", map[string]string{"cm.yaml": fmt.Sprintf(configMap, "allowed")})
		_, forbiddenURL := gitRepoAt("restricted-forbidden", map[string]string{"cm.yaml": fmt.Sprintf(configMap, "forbidden")})

		// The operator restricts the namespace (the tenant may not).
		res := &fleet.GitRepoRestriction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "only-allowed"},
			DefaultServiceAccount: "deployer", AllowedServiceAccounts: []string{"deployer"},
			AllowedRepoPatterns:     []string{regexp.QuoteMeta(env.GitURL) + "/restricted-allowed"},
			AllowedTargetNamespaces: []string{"tenant-app"}}
		Expect(tenant.Create(ctx, res.DeepCopy())).To(MatchError(ContainSubstring("forbidden")), "a tenant must not write its own restrictions")
		Expect(env.Admin.Create(ctx, res)).To(Succeed())

		// A GitRepo within the restriction deploys, with the default
		// service account.
		good := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "good"},
			Spec: fleet.GitRepoSpec{Repo: allowedURL, Branch: "main", TargetNamespace: "tenant-app", PollingInterval: pollEvery(time.Second)}}
		Expect(tenant.Create(ctx, good)).To(Succeed())
		gitRepoCondition(tenant, ns, "good", fleet.ConditionAccepted, metav1.ConditionTrue, fleet.ReasonBundlesRead, time.Minute)
		before := bundlesOf(ns, "good")
		Expect(before).To(HaveLen(1))
		Expect(before[0].Spec.ServiceAccount).To(Equal("deployer"))

		By("the tenant names another repository, no target namespace and a powerful service account")
		evil := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "evil"},
			Spec: fleet.GitRepoSpec{Repo: forbiddenURL, Branch: "main", ServiceAccount: "cluster-admin", PollingInterval: pollEvery(time.Second)}}
		Expect(tenant.Create(ctx, evil)).To(Succeed())
		c := gitRepoCondition(tenant, ns, "evil", fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonRestricted, time.Minute)
		Expect(c.Message).To(ContainSubstring("only-allowed"))
		gitRepoCondition(tenant, ns, "evil", fleet.ConditionReady, metav1.ConditionFalse, fleet.ReasonRestricted, 10*time.Second)

		By("the tenant turns its accepted GitRepo to a powerful service account, then to an unlisted repository")
		Expect(tenant.Get(ctx, client.ObjectKeyFromObject(good), good)).To(Succeed())
		good.Spec.ServiceAccount = "cluster-admin"
		Expect(tenant.Update(ctx, good)).To(Succeed())
		c = gitRepoCondition(tenant, ns, "good", fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonRestricted, time.Minute)
		Expect(c.Message).To(ContainSubstring("serviceAccount cluster-admin"))
		Expect(tenant.Get(ctx, client.ObjectKeyFromObject(good), good)).To(Succeed())
		good.Spec.ServiceAccount, good.Spec.Repo = "", allowedURL+"-not/../restricted-forbidden"
		Expect(tenant.Update(ctx, good)).To(Succeed())
		c = gitRepoCondition(tenant, ns, "good", fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonRestricted, time.Minute)
		Expect(c.Message).To(ContainSubstring("does not allow repo"))

		By("nothing was fetched or deployed for them; the accepted Bundle is as it was")
		Consistently(func(g Gomega) {
			g.Expect(bundlesOf(ns, "evil")).To(BeEmpty())
			after := bundlesOf(ns, "good")
			g.Expect(after).To(HaveLen(1))
			g.Expect(after[0].UID).To(Equal(before[0].UID))
			// Its spec, not its status: the bundle controller keeps
			// writing the status as the deployment settles.
			g.Expect(after[0].Generation).To(Equal(before[0].Generation))
			g.Expect(after[0].Spec).To(Equal(before[0].Spec))
			gr := &fleet.GitRepo{}
			g.Expect(env.Admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: "evil"}, gr)).To(Succeed())
			g.Expect(gr.Status.Commit).To(BeEmpty())
		}).WithTimeout(3 * time.Second).Should(Succeed())

		By("a changed restriction is applied at once")
		Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(res), res)).To(Succeed())
		res.AllowedRepoPatterns = append(res.AllowedRepoPatterns, regexp.QuoteMeta(env.GitURL)+"/restricted-.*")
		res.AllowedTargetNamespaces = nil
		res.AllowedServiceAccounts = append(res.AllowedServiceAccounts, "cluster-admin")
		Expect(env.Admin.Update(ctx, res)).To(Succeed())
		gitRepoCondition(tenant, ns, "evil", fleet.ConditionAccepted, metav1.ConditionTrue, fleet.ReasonBundlesRead, 30*time.Second)
	})

	It("2: a GitRepo's Helm credentials are held to the restriction's allowed Secret names too", func() {
		ctx, ns := env.Ctx, "tenant-restricted-helm"
		tenant, err := framework.TenantClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), ns)
		Expect(err).NotTo(HaveOccurred())
		_, url := gitRepoAt("restricted-helm", map[string]string{"cm.yaml": fmt.Sprintf(configMap, "helm")})
		Expect(env.Admin.Create(ctx, &fleet.GitRepoRestriction{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "only-gitcredential"},
			AllowedClientSecretNames: []string{"gitcredential"}})).To(Succeed())
		// A Secret the tenant may not read: say the operator's registry
		// credentials, placed in the namespace for another purpose.
		Expect(env.Admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "team-registry"},
			StringData: map[string]string{"username": "ops", "password": "registry-s3cret"}})).To(Succeed())

		repo := &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "helm-creds"},
			Spec: fleet.GitRepoSpec{Repo: url, Branch: "main", ClientSecretName: "gitcredential", HelmSecretName: "team-registry",
				HelmRepoURLRegex: ".*", PollingInterval: pollEvery(time.Second)}}
		Expect(tenant.Create(ctx, repo)).To(Succeed())
		c := gitRepoCondition(tenant, ns, "helm-creds", fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonRestricted, time.Minute)
		Expect(c.Message).To(ContainSubstring("helmSecretName team-registry"))
		Consistently(func(g Gomega) {
			g.Expect(bundlesOf(ns, "helm-creds")).To(BeEmpty())
			gr := &fleet.GitRepo{}
			g.Expect(env.Admin.Get(ctx, client.ObjectKeyFromObject(repo), gr)).To(Succeed())
			g.Expect(gr.Status.Commit).To(BeEmpty(), "nothing fetched")
		}).WithTimeout(3 * time.Second).Should(Succeed())
	})

	It("3: a local repository path is refused unless the operator allows local repositories", func() {
		ctx, ns := env.Ctx, "tenant-local"
		tenant, err := framework.TenantClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), ns)
		Expect(err).NotTo(HaveOccurred())
		// Another tenant's repository on the manager's disk, and the git
		// caches of every GitRepo.
		victim, _ := gitRepoAt("local-victim", map[string]string{"cm.yaml": fmt.Sprintf(configMap, "secret-config")})
		for name, url := range map[string]string{
			"path":     victim.Dir,
			"file-url": "file://" + victim.Dir,
			"cache":    "file://" + env.Options.GitCacheDir + "/tenant-restricted/good",
		} {
			Expect(tenant.Create(ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: fleet.GitRepoSpec{Repo: url, PollingInterval: pollEvery(time.Second)}})).To(Succeed())
		}
		for _, name := range []string{"path", "file-url", "cache"} {
			c := gitRepoCondition(tenant, ns, name, fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonLocalRepoDisabled, time.Minute)
			Expect(c.Message).To(ContainSubstring("--allow-local-repos"))
			gitRepoCondition(tenant, ns, name, fleet.ConditionGitPolling, metav1.ConditionFalse, fleet.ReasonLocalRepoDisabled, 10*time.Second)
		}
		Consistently(func(g Gomega) {
			list := &fleet.BundleList{}
			g.Expect(env.Admin.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			g.Expect(list.Items).To(BeEmpty())
		}).WithTimeout(2 * time.Second).Should(Succeed())
	})
}

// availabilitySpecs: hole 4, one repository cannot take the manager down
// for everyone.
func availabilitySpecs() {
	Context("4: one repository cannot take the manager down for everyone", func() {
		// The victim: another tenant's GitRepo that must keep syncing.
		victimSyncs := func(ns string, repo *gittest.Repo, commit int) {
			sha, err := repo.Commit("more", map[string]string{fmt.Sprintf("cm%d.yaml", commit): fmt.Sprintf(configMap, fmt.Sprintf("v%d", commit))})
			Expect(err).NotTo(HaveOccurred())
			Eventually(func(g Gomega) {
				gr := &fleet.GitRepo{}
				g.Expect(env.Admin.Get(env.Ctx, client.ObjectKey{Namespace: ns, Name: "victim"}, gr)).To(Succeed())
				g.Expect(gr.Status.Commit).To(Equal(sha))
			}).WithTimeout(time.Minute).Should(Succeed())
		}
		var victimNS string
		var victimRepo *gittest.Repo
		BeforeEach(func() {
			victimNS = "victim-liveness"
			_, err := framework.TenantClient(env.Ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), victimNS)
			Expect(err).NotTo(HaveOccurred())
			if victimRepo != nil {
				return
			}
			var url string
			victimRepo, url = gitRepoAt("liveness-victim", map[string]string{"cm.yaml": fmt.Sprintf(configMap, "v0")})
			Expect(env.Admin.Create(env.Ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: victimNS, Name: "victim"},
				Spec: fleet.GitRepoSpec{Repo: url, Branch: "main", PollingInterval: pollEvery(time.Second)}})).To(Succeed())
			gitRepoCondition(env.Admin, victimNS, "victim", fleet.ConditionAccepted, metav1.ConditionTrue, fleet.ReasonBundlesRead, time.Minute)
		})

		It("4a: a .fleetignore and a values file linked to /dev/zero are refused", func() {
			ctx, ns := env.Ctx, "tenant-devzero"
			tenant, err := framework.TenantClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), ns)
			Expect(err).NotTo(HaveOccurred())
			for _, link := range []string{".fleetignore", "values.yaml"} {
				name := "devzero-" + strings.TrimPrefix(link, ".")
				r, err := gittest.NewRepo(filepath.Join(env.GitRoot, name), "main")
				Expect(err).NotTo(HaveOccurred())
				Expect(os.Symlink("/dev/zero", filepath.Join(r.Dir, link))).To(Succeed())
				_, err = r.Commit("attack", map[string]string{"cm.yaml": fmt.Sprintf(configMap, "x"), "fleet.yaml": "helm:\n  chart: ./chart\n  valuesFiles: [values.yaml]\n"})
				Expect(err).NotTo(HaveOccurred())
				Expect(tenant.Create(ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: strings.ReplaceAll(name, "fleetignore", "ignore")},
					Spec: fleet.GitRepoSpec{Repo: env.GitURL + "/" + name, Branch: "main", PollingInterval: pollEvery(time.Second)}})).To(Succeed())
			}
			for _, name := range []string{"devzero-ignore", "devzero-values.yaml"} {
				c := gitRepoCondition(tenant, ns, name, fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonInvalidBundle, time.Minute)
				Expect(c.Message).To(ContainSubstring("points outside the repository root"))
			}
			list := &fleet.BundleList{}
			Expect(env.Admin.List(ctx, list, client.InNamespace(ns))).To(Succeed())
			Expect(list.Items).To(BeEmpty())
			victimSyncs(victimNS, victimRepo, 1)
		})

		It("4b: a values template that loops or prints without end fails at once", func() {
			ctx, ns := env.Ctx, "tenant-template"
			tenant, err := framework.TenantClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), ns)
			Expect(err).NotTo(HaveOccurred())
			// A Cluster of the tenant's, so that values are rendered for it.
			Expect(tenant.Create(ctx, &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c1", Labels: map[string]string{"env": "x"}}})).To(Succeed())
			_, url := gitRepoAt("template-loop", map[string]string{
				"cm.yaml":    fmt.Sprintf(configMap, "x"),
				"fleet.yaml": "helm:\n  values:\n    loop: \"${ range 100000000000 }${ end }\"\n    big: \"${ range 90000 }xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx${ end }\"\n",
			})
			Expect(tenant.Create(ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "loop"},
				Spec: fleet.GitRepoSpec{Repo: url, Branch: "main", PollingInterval: pollEvery(time.Second),
					Targets: []fleet.GitTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{}}}}})).To(Succeed())
			Eventually(func(g Gomega) {
				bs := bundlesOf(ns, "loop")
				g.Expect(bs).To(HaveLen(1))
				ready := meta.FindStatusCondition(bs[0].Status.Conditions, fleet.ConditionReady)
				g.Expect(ready).NotTo(BeNil())
				g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
				g.Expect(ready.Message).To(Or(ContainSubstring("iterate more than"), ContainSubstring("print more than")))
			}).WithTimeout(time.Minute).Should(Succeed())
			bds := &fleet.BundleDeploymentList{}
			Expect(env.Admin.List(ctx, bds, client.MatchingLabels{fleet.BundleNamespaceLabel: ns})).To(Succeed())
			Expect(bds.Items).To(BeEmpty())
			victimSyncs(victimNS, victimRepo, 2)
		})

		It("4c: an endless chart download is cut off", func() {
			ctx, ns := env.Ctx, "tenant-bigchart"
			tenant, err := framework.TenantClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), ns)
			Expect(err).NotTo(HaveOccurred())
			var sent atomic.Int64
			endless := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
				buf := make([]byte, 64<<10)
				for req.Context().Err() == nil && sent.Load() < 4<<30 {
					if _, err := w.Write(buf); err != nil {
						return
					}
					sent.Add(int64(len(buf)))
				}
			}))
			DeferCleanup(endless.Close)
			_, url := gitRepoAt("endless-chart", map[string]string{"fleet.yaml": "helm:\n  repo: " + endless.URL + "\n  chart: huge\n"})
			Expect(tenant.Create(ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "huge"},
				Spec: fleet.GitRepoSpec{Repo: url, Branch: "main", PollingInterval: pollEvery(time.Hour)}})).To(Succeed())
			c := gitRepoCondition(tenant, ns, "huge", fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonInvalidBundle, time.Minute)
			Expect(c.Message).To(ContainSubstring("the most the manager downloads"))
			Expect(sent.Load()).To(BeNumerically("<", 1<<30), "the manager kept reading")
			Expect(bundlesOf(ns, "huge")).To(BeEmpty())
			victimSyncs(victimNS, victimRepo, 3)
		})
	})
}

// credentialAndStallSpecs: holes 14 and 15, where Helm credentials go, and
// a hanging git server.
func credentialAndStallSpecs() {
	It("14: Helm credentials go only to hosts the GitRepo's helmRepoURLRegex allows, never to a host a fleet.yaml names", func() {
		ctx, ns := env.Ctx, "tenant-helmcreds"
		tenant, err := framework.TenantClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), ns)
		Expect(err).NotTo(HaveOccurred())
		chart := []chartrepo.Chart{{Name: "app", Version: "1.0.0", Templates: map[string]string{"cm.yaml": fmt.Sprintf(configMap, "chart")}}}
		trusted, err := chartrepo.New(chart, chartrepo.Options{Username: "tenant", Password: "helm-s3cret"})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(trusted.Close)
		attacker, err := chartrepo.New(chart, chartrepo.Options{})
		Expect(err).NotTo(HaveOccurred())
		DeferCleanup(attacker.Close)

		Expect(tenant.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "helm-creds"}, Type: corev1.SecretTypeBasicAuth,
			Data: map[string][]byte{corev1.BasicAuthUsernameKey: []byte("tenant"), corev1.BasicAuthPasswordKey: []byte("helm-s3cret")}})).To(Succeed())
		// The repository (foothold f) has a bundle for the trusted host
		// and one that names the attacker's host.
		fleetYAML := func(u string) string { return "helm:\n  repo: " + u + "\n  chart: app\n  version: 1.0.0\n" }
		_, url := gitRepoAt("helm-creds", map[string]string{"trusted/fleet.yaml": fleetYAML(trusted.URL), "stolen/fleet.yaml": fleetYAML(attacker.URL)})
		Expect(tenant.Create(ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "charts"},
			Spec: fleet.GitRepoSpec{Repo: url, Branch: "main", HelmSecretName: "helm-creds",
				HelmRepoURLRegex: regexp.QuoteMeta(trusted.URL) + "(/.*)?", PollingInterval: pollEvery(time.Hour)}})).To(Succeed())
		gitRepoCondition(tenant, ns, "charts", fleet.ConditionAccepted, metav1.ConditionTrue, fleet.ReasonBundlesRead, time.Minute)
		Expect(bundlesOf(ns, "charts")).To(HaveLen(2))
		n, auths := attacker.Requests()
		Expect(n).To(BeNumerically(">", 0), "the attacker's host was asked for its chart")
		Expect(auths).To(BeEmpty(), "the attacker's host received credentials")
		_, auths = trusted.Requests()
		Expect(auths).NotTo(BeEmpty(), "the allowed host gets the credentials")

		By("without helmRepoURLRegex, no host gets the credentials")
		_, url = gitRepoAt("helm-creds-noregex", map[string]string{"stolen/fleet.yaml": fleetYAML(attacker.URL)})
		Expect(tenant.Create(ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "noregex"},
			Spec: fleet.GitRepoSpec{Repo: url, Branch: "main", HelmSecretName: "helm-creds", PollingInterval: pollEvery(time.Hour)}})).To(Succeed())
		gitRepoCondition(tenant, ns, "noregex", fleet.ConditionAccepted, metav1.ConditionTrue, fleet.ReasonBundlesRead, time.Minute)
		n2, auths := attacker.Requests()
		Expect(n2).To(BeNumerically(">", n))
		Expect(auths).To(BeEmpty(), "the attacker's host received credentials")
	})

	It("15: a hanging git server behind one tenant's GitRepos does not stall another tenant's, and a GitRepo's bundles are capped", func() {
		ctx := env.Ctx
		tenantA, err := framework.TenantClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), "tenant-slow")
		Expect(err).NotTo(HaveOccurred())
		tenantB, err := framework.TenantClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), "tenant-fast")
		Expect(err).NotTo(HaveOccurred())
		release := make(chan struct{})
		var hanging atomic.Int64
		slow := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, req *http.Request) {
			hanging.Add(1)
			defer hanging.Add(-1)
			select {
			case <-release:
			case <-req.Context().Done():
			}
		}))
		DeferCleanup(func() { close(release); slow.Close() })
		for i := range 6 {
			Expect(tenantA.Create(ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-slow", Name: fmt.Sprintf("slow-%d", i)},
				Spec: fleet.GitRepoSpec{Repo: fmt.Sprintf("%s/repo-%d", slow.URL, i), Branch: "main", PollingInterval: pollEvery(time.Second)}})).To(Succeed())
		}
		Eventually(hanging.Load).WithTimeout(30 * time.Second).Should(BeNumerically(">=", 2))

		_, url := gitRepoAt("fast", map[string]string{"cm.yaml": fmt.Sprintf(configMap, "fast")})
		start := time.Now()
		Expect(tenantB.Create(ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-fast", Name: "fast"},
			Spec: fleet.GitRepoSpec{Repo: url, Branch: "main", PollingInterval: pollEvery(time.Second)}})).To(Succeed())
		gitRepoCondition(tenantB, "tenant-fast", "fast", fleet.ConditionAccepted, metav1.ConditionTrue, fleet.ReasonBundlesRead, 20*time.Second)
		GinkgoWriter.Printf("tenant B synced in %s while %d fetches of tenant A hang\n", time.Since(start), hanging.Load())
		Expect(hanging.Load()).To(BeNumerically("<=", 2), "one namespace holds at most half of the 4 fetch slots")

		By("a repository with more bundles than the cap is refused")
		files := map[string]string{}
		for i := range 1001 {
			files[fmt.Sprintf("b%04d/fleet.yaml", i)] = "namespace: x\n"
		}
		_, url = gitRepoAt("many-bundles", files)
		Expect(tenantB.Create(ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: "tenant-fast", Name: "many"},
			Spec: fleet.GitRepoSpec{Repo: url, Branch: "main", PollingInterval: pollEvery(time.Hour)}})).To(Succeed())
		c := gitRepoCondition(tenantB, "tenant-fast", "many", fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonInvalidBundle, time.Minute)
		Expect(c.Message).To(ContainSubstring("more than the limit of 1000"))
		Expect(bundlesOf("tenant-fast", "many")).To(BeEmpty())
	})
}
