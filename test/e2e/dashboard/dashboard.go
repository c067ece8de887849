package dashboard

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chromedp/chromedp"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/internal/dashboard"
	"github.com/gitfleet/fleet/internal/gitfetch/gittest"
	"github.com/gitfleet/fleet/internal/summary"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/framework/e2e"
)

// SpecInput is what DashboardSpec runs against.
type SpecInput struct {
	Upstream    *controlplane.ControlPlane
	Downstreams []*controlplane.ControlPlane
	Admin       client.Client
	LogDir      string
	// ManagerURL is the in-process manager's dashboard.
	ManagerURL string
	// Screenshot, when set, is where the matrix's screenshot is written.
	Screenshot string
}

const (
	viewerRole = "dashboard-e2e-viewer"
	hiddenWS   = "dashboard-hidden"
	// registerTimeout bounds an agent's registration.
	registerTimeout = 2 * time.Minute
)

// agentArgs make agents check in and retry quickly.
func agentArgs() []string {
	return []string{"--checkin-interval", "5s", "--min-backoff", "100ms", "--max-backoff", "2s", "--resync", "30s"}
}

// fixture is what the specs share.
type fixture struct {
	ctx      context.Context
	in       SpecInput
	cs       kubernetes.Interface
	clusters []*e2e.JoinedCluster
	repo     *gittest.Repo
	git      *gittest.Server
	// ws is the workspace the agents registered into.
	ws string
	// viewer's rights cover ws and its clusters' namespaces; overseer's
	// every namespace.
	viewerToken, overseerToken string
	dir                        string
}

// DashboardSpec checks the dashboard in a real browser. Call it in an
// Ordered container.
func DashboardSpec(ctx context.Context, inputGetter func() SpecInput) {
	f := &fixture{ctx: ctx}
	BeforeAll(func() { f.setUp(inputGetter()) })
	matrixSteps(f)
	accessSteps(f)
}

func (f *fixture) setUp(in SpecInput) {
	GinkgoHelper()
	f.in = in
	f.dir = GinkgoT().TempDir()
	var err error
	f.cs, err = kubernetes.NewForConfig(in.Upstream.Config)
	Expect(err).NotTo(HaveOccurred())
	for _, cp := range in.Downstreams {
		f.clusters = append(f.clusters, e2e.Join(f.ctx, e2e.JoinInput{Upstream: in.Upstream, Downstream: cp, Admin: in.Admin,
			LogDir: in.LogDir, AgentArgs: agentArgs()}, registerTimeout))
	}
	DeferCleanup(func() {
		for _, j := range f.clusters {
			j.StopAgents()
		}
	})
	f.ws = f.clusters[0].Cluster.Namespace

	f.repo, err = gittest.NewRepo(filepath.Join(f.dir, "git", "apps"), "main")
	Expect(err).NotTo(HaveOccurred())
	_, err = f.repo.Commit("two bundles", map[string]string{
		"one/fleet.yaml": "defaultNamespace: one\n",
		"one/cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: one}\ndata: {a: b}\n",
		"two/fleet.yaml": "defaultNamespace: two\n",
		"two/cm.yaml":    "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: two}\ndata: {a: b}\n",
	})
	Expect(err).NotTo(HaveOccurred())
	f.git = gittest.NewServer(filepath.Join(f.dir, "git"))
	DeferCleanup(f.git.Close)
	all := []fleet.GitTarget{{Name: "all", ClusterSelector: &metav1.LabelSelector{}}}
	Expect(in.Admin.Create(f.ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "apps", Namespace: f.ws},
		Spec: fleet.GitRepoSpec{Repo: f.git.RepoURL("apps"), Branch: "main",
			PollingInterval: &metav1.Duration{Duration: time.Second}, Targets: all}})).To(Succeed())

	// Another workspace, with a cluster and a GitRepo of its own, that the
	// viewer may not see.
	Expect(in.Admin.Create(f.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: hiddenWS}})).To(Succeed())
	Expect(in.Admin.Create(f.ctx, &fleet.Cluster{ObjectMeta: metav1.ObjectMeta{Name: "hidden-cluster", Namespace: hiddenWS}})).To(Succeed())
	Expect(in.Admin.Create(f.ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Name: "hidden-repo", Namespace: hiddenWS},
		Spec: fleet.GitRepoSpec{Repo: f.git.RepoURL("apps"), Branch: "main", Targets: all}})).To(Succeed())

	f.grantViewers()
}

// grantViewers makes two ServiceAccounts: viewer, who may read fleet's kinds
// in the agents' workspace and its clusters' namespaces only, and overseer,
// who may read them everywhere; and gets a token of each.
func (f *fixture) grantViewers() {
	GinkgoHelper()
	admin := f.in.Admin
	Expect(admin.Create(f.ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: viewerRole},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{fleet.GroupVersion.Group}, Resources: dashboard.Resources,
			Verbs: []string{"get", "list", "watch"}}}})).To(Succeed())
	for _, name := range []string{"viewer", "overseer"} {
		Expect(admin.Create(f.ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: f.ws}})).To(Succeed())
	}
	subject := func(name string) []rbacv1.Subject {
		return []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: f.ws}}
	}
	ref := rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: viewerRole}
	Expect(admin.Create(f.ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dashboard-e2e-overseer"},
		RoleRef: ref, Subjects: subject("overseer")})).To(Succeed())
	namespaces := make([]string, 0, 1+len(f.clusters))
	namespaces = append(namespaces, f.ws)
	for _, j := range f.clusters {
		namespaces = append(namespaces, j.Cred.ClusterNamespace)
	}
	for _, ns := range namespaces {
		Expect(admin.Create(f.ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "dashboard-e2e-viewer", Namespace: ns},
			RoleRef: ref, Subjects: subject("viewer")})).To(Succeed())
	}
	f.viewerToken = f.token("viewer")
	f.overseerToken = f.token("overseer")
}

func (f *fixture) token(sa string) string {
	GinkgoHelper()
	exp := int64(3600)
	tr, err := f.cs.CoreV1().ServiceAccounts(f.ws).CreateToken(f.ctx, sa,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

// tokenConfig is a kubeconfig of the upstream with only a bearer token.
func (f *fixture) tokenConfig(token string) *rest.Config {
	cfg := rest.AnonymousClientConfig(f.in.Upstream.Config)
	cfg.BearerToken = token
	return cfg
}

// local starts `fleet dashboard`'s server with cfg and returns its URL.
func (f *fixture) local(cfg *rest.Config, workspaces ...string) string {
	GinkgoHelper()
	ctx, cancel := context.WithCancel(f.ctx)
	DeferCleanup(cancel)
	l, err := dashboard.StartLocal(ctx, dashboard.LocalOptions{Config: cfg, Workspaces: workspaces})
	Expect(err).NotTo(HaveOccurred())
	go func() { _ = l.Serve(ctx) }()
	return l.URL
}

func (f *fixture) browser() *Browser {
	GinkgoHelper()
	b, err := NewBrowser(f.ctx, f.dir)
	Expect(err).NotTo(HaveOccurred())
	DeferCleanup(b.Close)
	return b
}

// cells reads the matrix's cells: "bundle@cluster" to state.
func cells(g Gomega, b *Browser) map[string]string {
	out, err := Eval[map[string]string](b, `Object.fromEntries([...document.querySelectorAll('#matrix a.cell')].map(a => [a.dataset.bundle + '@' + a.dataset.cluster, a.dataset.state]))`)
	g.Expect(err).NotTo(HaveOccurred())
	return out
}

func text(g Gomega, b *Browser, expr string) string {
	s, err := Eval[string](b, expr)
	g.Expect(err).NotTo(HaveOccurred())
	return s
}

func (f *fixture) clusterNames() []string {
	names := make([]string, 0, len(f.clusters))
	for _, j := range f.clusters {
		names = append(names, j.Cluster.Name)
	}
	return names
}

func matrixSteps(f *fixture) {
	// One browser page and one fleet dashboard for both specs: the second
	// watches the page the first opened update in place. Made in BeforeAll,
	// so they are closed after the last of them, not after the first.
	Context("the matrix", Ordered, func() {
		var b *Browser
		var url string
		BeforeAll(func() {
			url = f.local(f.in.Upstream.Config)
			b = f.browser()
		})
		matrixSpecs(f, func() (*Browser, string) { return b, url })
	})
}

func matrixSpecs(f *fixture, page func() (*Browser, string)) {
	It("shows every bundle Ready on every cluster in the matrix (fleet dashboard, the admin's kubeconfig)", func() {
		b, url := page()
		Expect(b.Do(30*time.Second, chromedp.Navigate(url))).To(Succeed())
		Expect(b.Do(30*time.Second, chromedp.Navigate(strings.SplitN(url, "/login", 2)[0]+"/matrix?ws="+f.ws),
			chromedp.WaitVisible(chromedp.CSS("#matrix")))).To(Succeed())
		e2e.WaitFor("every bundle Ready on every cluster, in the matrix", func(g Gomega) {
			c := cells(g, b)
			for _, cl := range f.clusterNames() {
				for _, bundle := range []string{"apps-one", "apps-two"} {
					g.Expect(c).To(HaveKeyWithValue(bundle+"@"+cl, "Ready"))
				}
			}
		}, 3*time.Minute, 500*time.Millisecond)
		if f.in.Screenshot != "" {
			png, err := b.Screenshot()
			Expect(err).NotTo(HaveOccurred())
			Expect(len(png)).To(BeNumerically("<", 300<<10), "the screenshot is small")
			Expect(os.WriteFile(f.in.Screenshot, png, 0o600)).To(Succeed())
		}
	})

	It("turns a cell red within seconds of a commit that breaks one bundle on one cluster, and the bundle's page shows the error", func() {
		b, _ := page()
		broken := f.clusters[0].Cluster.Name
		// A mark on the page: it must survive, the page is updated in place.
		Expect(text(Default, b, `window.fleetMark = 'kept'; 'ok'`)).To(Equal("ok"))
		_, err := f.repo.Commit("break two on one cluster", map[string]string{
			"two/fleet.yaml": "defaultNamespace: two\ntargetCustomizations:\n- name: broken\n  clusterName: " + broken +
				"\n  kustomize: {dir: broken}\n",
			"two/broken/kustomization.yaml": "resources: [bad.yaml]\n",
			"two/broken/bad.yaml":           "apiVersion: example.com/v1\nkind: NoSuchKind\nmetadata: {name: bad}\n",
		})
		Expect(err).NotTo(HaveOccurred())
		var failedAt time.Time
		e2e.WaitFor("the BundleDeployment of apps-two on "+broken+" failing", func(g Gomega) {
			bd := &fleet.BundleDeployment{}
			g.Expect(f.in.Admin.Get(f.ctx, client.ObjectKey{Namespace: f.clusters[0].Cred.ClusterNamespace, Name: "apps-two"}, bd)).To(Succeed())
			g.Expect(summary.State(bd)).To(Equal(fleet.ErrApplied), summary.Message(bd))
		}, 2*time.Minute, 100*time.Millisecond)
		failedAt = time.Now()
		e2e.WaitFor("the cell apps-two on "+broken+" red", func(g Gomega) {
			g.Expect(cells(g, b)).To(HaveKeyWithValue("apps-two@"+broken, "ErrApplied"))
			g.Expect(text(g, b, `document.querySelector('#matrix a.cell[data-bundle="apps-two"][data-cluster="`+broken+`"]').className`)).To(ContainSubstring("err"))
		}, 5*time.Second, 100*time.Millisecond)
		GinkgoWriter.Printf("The cell turned red %s after the BundleDeployment failed\n", time.Since(failedAt))
		Expect(time.Since(failedAt)).To(BeNumerically("<", 5*time.Second))
		Expect(text(Default, b, `window.fleetMark`)).To(Equal("kept"), "the page was updated in place, not reloaded")
		Expect(cells(Default, b)).To(HaveKeyWithValue("apps-one@"+broken, "Ready"), "only apps-two is broken")

		Expect(b.Do(20*time.Second, chromedp.Click(chromedp.CSS(`#matrix a.cell[data-bundle="apps-two"][data-cluster="`+broken+`"]`)),
			chromedp.WaitVisible(chromedp.CSS(`section.deployment[data-cluster="`+broken+`"]`)))).To(Succeed())
		msg := text(Default, b, `document.querySelector('section.deployment[data-cluster="`+broken+`"] .deployment-error').textContent`)
		Expect(msg).To(ContainSubstring("NoSuchKind"))
	})
}

func accessSteps(f *fixture) {
	It("refuses anonymous requests, unknown tokens and other sites' logins to the manager's dashboard", func() {
		for _, path := range []string{"/", "/matrix", "/events", "/bundles/" + f.ws + "/apps-one"} {
			resp, err := http.Get(f.in.ManagerURL + path)
			Expect(err).NotTo(HaveOccurred())
			_ = resp.Body.Close()
			Expect(resp.StatusCode).To(Equal(http.StatusUnauthorized), "anonymous GET %s", path)
		}
		Expect(status(f.in.ManagerURL+"/matrix", "not-a-token")).To(Equal(http.StatusUnauthorized))
		Expect(status(f.in.ManagerURL+"/matrix", f.viewerToken)).To(Equal(http.StatusOK))
	})

	It("gives a clear status and page for bad URLs", func() {
		for path, want := range map[string]int{
			"/matrix?label=%3D%3D":                      http.StatusBadRequest,
			"/matrix?state=Sideways":                    http.StatusBadRequest,
			"/matrix?page=zero":                         http.StatusBadRequest,
			"/matrix?page=99":                           http.StatusNotFound,
			"/matrix?ws=no-such-workspace":              http.StatusNotFound,
			"/bundles/" + f.ws + "/no-such":             http.StatusNotFound,
			"/clusters/" + f.ws + "/no-such":            http.StatusNotFound,
			"/no/such/page":                             http.StatusNotFound,
			"/bundles/" + hiddenWS + "/hidden-repo-one": http.StatusNotFound,
		} {
			Expect(status(f.in.ManagerURL+path, f.viewerToken)).To(Equal(want), "GET %s as the viewer", path)
		}
		e2e.WaitFor("the hidden workspace's bundle shown to the overseer", func(g Gomega) {
			g.Expect(status(f.in.ManagerURL+"/bundles/"+hiddenWS+"/hidden-repo-one", f.overseerToken)).To(Equal(http.StatusOK))
		}, time.Minute, 500*time.Millisecond)
	})

	It("lists each cluster with its agent version and Offline, and says on the Cluster API page that Cluster API is not installed", func() {
		code, body := page(f.in.ManagerURL+"/clusters?ws="+f.ws, f.viewerToken)
		Expect(code).To(Equal(http.StatusOK))
		for _, name := range f.clusterNames() {
			Expect(body).To(ContainSubstring(`data-name="` + f.ws + `/` + name + `"`))
		}
		Expect(strings.Count(body, `<td class="agent"`)).To(Equal(len(f.clusters)), "an agent version cell per cluster")
		Expect(strings.Count(body, `<td class="offline">no</td>`)).To(Equal(len(f.clusters)), "no cluster Offline")
		code, body = page(f.in.ManagerURL+"/capi", f.viewerToken)
		Expect(code).To(Equal(http.StatusOK), "a note, not an error page")
		Expect(body).To(ContainSubstring("Cluster API is not installed on this cluster"))
	})

	It("shows a user whose rights cover one workspace only that workspace, served by the manager", func() {
		b := f.browser()
		Expect(b.Do(30*time.Second, chromedp.Navigate(f.in.ManagerURL+"/"),
			chromedp.WaitVisible(chromedp.CSS("#token")),
			chromedp.SendKeys(chromedp.CSS("#token"), f.viewerToken),
			chromedp.Submit(chromedp.CSS("#token")),
			chromedp.WaitVisible(chromedp.CSS("section.cards")))).To(Succeed())
		f.expectOnlyWorkspace(b, f.in.ManagerURL)
	})

	It("shows a user whose rights cover one workspace only that workspace, served by fleet dashboard", func() {
		url := f.local(f.tokenConfig(f.viewerToken), f.ws)
		b := f.browser()
		Expect(b.Do(30*time.Second, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("section.cards")))).To(Succeed())
		f.expectOnlyWorkspace(b, strings.SplitN(url, "/login", 2)[0])
	})
}

// expectOnlyWorkspace checks that the browser's dashboard shows the agents'
// workspace and nothing of the hidden one.
func (f *fixture) expectOnlyWorkspace(b *Browser, base string) {
	GinkgoHelper()
	for _, page := range []string{"/matrix", "/clusters", "/gitrepos", "/"} {
		Expect(b.Do(30*time.Second, chromedp.Navigate(base+page), chromedp.WaitVisible(chromedp.CSS("#content")))).To(Succeed())
		body := text(Default, b, `document.getElementById('content').innerText`)
		Expect(body).NotTo(ContainSubstring(hiddenWS), "page %s", page)
		Expect(body).NotTo(ContainSubstring("hidden-"), "page %s", page)
		if page == "/clusters" {
			for _, name := range f.clusterNames() {
				Expect(body).To(ContainSubstring(name))
			}
		}
		if page == "/gitrepos" {
			Expect(body).To(ContainSubstring("apps"))
		}
	}
	Expect(b.Do(20*time.Second, chromedp.Navigate(base+"/matrix?ws="+hiddenWS), chromedp.WaitVisible(chromedp.CSS("#error-message")))).To(Succeed())
	Expect(text(Default, b, `document.getElementById('error-message').textContent`)).To(ContainSubstring("no workspace"))
}

// page GETs url with a bearer token and returns the status code and body.
func page(url, token string) (int, string) {
	GinkgoHelper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	Expect(err).NotTo(HaveOccurred())
	return resp.StatusCode, string(b)
}

// status GETs url with a bearer token and returns the status code.
func status(url, token string) int {
	GinkgoHelper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	return resp.StatusCode
}
