package dashboard_test

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	clusterv1 "sigs.k8s.io/cluster-api/api/core/v1beta2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers/capi"
	"github.com/gitfleet/fleet/internal/dashboard"
	"github.com/gitfleet/fleet/test/controlplane"
	"github.com/gitfleet/fleet/test/envtest"
)

// env is a control plane serving Cluster API's Cluster, with the manager's
// real Cluster API enrolment running: the conditions the page shows are
// the ones it writes.
var env *envtest.Environment

const capiNS = "capi-ws"

func TestMain(m *testing.M) {
	os.Exit(envtest.Run(context.Background(), envtest.RunInput{
		M: m, Name: "dashboard", CAPI: true, Namespaces: []string{capiNS},
		SetupReconcilers: func(ctx context.Context, mgr ctrl.Manager) error {
			return (&capi.Reconciler{Client: mgr.GetClient(), StaleAfter: time.Minute}).SetupWithManager(ctx, mgr)
		},
		SetupEnv: func(e *envtest.Environment) { env = e },
	}))
}

// capiClusters makes four Cluster API Clusters as Cluster API leaves them:
// one ready to enrol (its control plane initialized, its kubeconfig Secret
// written), one whose control plane is not initialized, one paused and one
// opted out; and waits until the enrolment has enrolled the first.
func capiClusters(t *testing.T) {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	mk := func(name string, mutate func(*clusterv1.Cluster)) *clusterv1.Cluster {
		c := &clusterv1.Cluster{ObjectMeta: metav1.ObjectMeta{Namespace: capiNS, Name: name},
			Spec: clusterv1.ClusterSpec{ControlPlaneEndpoint: clusterv1.APIEndpoint{Host: "127.0.0.1", Port: 6443}}}
		if mutate != nil {
			mutate(c)
		}
		g.Expect(env.CreateAndWait(ctx, c)).To(Succeed())
		return c
	}
	ready := mk("ready", nil)
	g.Expect(env.Status().Patch(ctx, ready, client.RawPatch(types.MergePatchType,
		[]byte(`{"status":{"initialization":{"controlPlaneInitialized":true}}}`)))).To(Succeed())
	g.Expect(env.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: capiNS, Name: capi.KubeconfigSecretName("ready"),
		Labels: map[string]string{clusterv1.ClusterNameLabel: "ready"}}, Type: clusterv1.ClusterSecretType,
		Data: map[string][]byte{fleet.KubeConfigSecretValueKey: []byte("kubeconfig")}})).To(Succeed())
	mk("booting", nil)
	mk("paused", func(c *clusterv1.Cluster) { c.Spec.Paused = ptr.To(true) })
	mk("optout", func(c *clusterv1.Cluster) { c.Labels = map[string]string{capi.EnrollLabel: "false"} })
	g.Eventually(func(g Gomega) {
		fc := &fleet.Cluster{}
		g.Expect(env.Get(ctx, types.NamespacedName{Namespace: capiNS, Name: "ready"}, fc)).To(Succeed())
		for _, name := range []string{"ready", "booting"} {
			c := &clusterv1.Cluster{}
			g.Expect(env.Get(ctx, types.NamespacedName{Namespace: capiNS, Name: name}, c)).To(Succeed())
			g.Expect(c.Status.Conditions).To(ContainElement(HaveField("Type", capi.ConditionFleetAgentReady)), name)
		}
	}, 30*time.Second, 100*time.Millisecond).Should(Succeed())
}

// browse logs in to a `fleet dashboard` started with cfg and returns a
// function that GETs a page.
func browse(t *testing.T, cfg *rest.Config, workspaces ...string) func(path string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	l, err := dashboard.StartLocal(ctx, dashboard.LocalOptions{Config: cfg, Workspaces: workspaces})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	go func() { _ = l.Serve(ctx) }()
	jar, _ := cookiejar.New(nil)
	hc := &http.Client{Jar: jar, Timeout: 10 * time.Second}
	resp, err := hc.Get(l.URL)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	_ = resp.Body.Close()
	base := strings.SplitN(l.URL, "/login", 2)[0]
	return func(path string) (int, string) {
		resp, err := hc.Get(base + path)
		if err != nil {
			return 0, err.Error()
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
}

// row is the HTML of the page's row of a Cluster API cluster.
func row(body, name string) string {
	_, rest, ok := strings.Cut(body, `<tr data-name="`+capiNS+`/`+name+`">`)
	if !ok {
		return ""
	}
	r, _, _ := strings.Cut(rest, "</tr>")
	return r
}

func expectCAPIRows(g Gomega, body string) {
	g.Expect(body).NotTo(ContainSubstring(`id="capi-note"`))
	ready := row(body, "ready")
	g.Expect(ready).To(ContainSubstring("initialized"))
	g.Expect(ready).To(ContainSubstring("False Installing"), "enrolled, its agent not installed: no import controller runs here")
	g.Expect(ready).To(ContainSubstring(`href="/clusters/`+capiNS+`/ready"`), "the fleet Cluster it became")
	booting := row(body, "booting")
	g.Expect(booting).To(ContainSubstring("False WaitingForControlPlane"))
	g.Expect(booting).To(ContainSubstring("not initialized"))
	g.Expect(booting).To(ContainSubstring("waiting for the control plane to be initialized"))
	g.Expect(booting).To(ContainSubstring("—"), "no fleet Cluster")
	g.Expect(row(body, "paused")).To(ContainSubstring("It is paused"))
	g.Expect(row(body, "optout")).To(ContainSubstring("It is opted out: its label fleet.cattle.io/enroll=false"))
}

func TestCAPIPage(t *testing.T) {
	capiClusters(t)
	admin := rest.CopyConfig(env.Config)

	t.Run("fleet dashboard shows Cluster API clusters, their enrolment, the fleet Cluster and why not enrolled", func(t *testing.T) {
		get := browse(t, admin)
		NewWithT(t).Eventually(func(g Gomega) {
			code, body := get("/capi")
			g.Expect(code).To(Equal(http.StatusOK), body)
			expectCAPIRows(g, body)
		}, 20*time.Second, 200*time.Millisecond).Should(Succeed())
	})

	cs, err := kubernetes.NewForConfig(env.Config)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	// fleet-reader may read fleet's kinds in the workspace, not Cluster
	// API's; capi-reader may read both.
	fleetReader := serviceAccount(t, cs, "fleet-reader", []rbacv1.PolicyRule{
		{APIGroups: []string{fleet.GroupVersion.Group}, Resources: dashboard.Resources, Verbs: []string{"get", "list", "watch"}}})
	capiReader := serviceAccount(t, cs, "capi-reader", []rbacv1.PolicyRule{
		{APIGroups: []string{fleet.GroupVersion.Group}, Resources: dashboard.Resources, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{clusterv1.GroupVersion.Group}, Resources: []string{"clusters"}, Verbs: []string{"get", "list", "watch"}}})

	t.Run("fleet dashboard says so, not an error page, when the user may not list them", func(t *testing.T) {
		g := NewWithT(t)
		get := browse(t, tokenConfig(fleetReader), capiNS)
		code, body := get("/capi")
		g.Expect(code).To(Equal(http.StatusOK), body)
		g.Expect(body).To(ContainSubstring(`id="capi-note"`))
		g.Expect(body).To(ContainSubstring("You may not list Cluster API clusters"))
		g.Expect(row(body, "ready")).To(BeEmpty())
	})

	t.Run("the manager's dashboard shows each user what they may list", func(t *testing.T) {
		dc, err := discovery.NewDiscoveryClientForConfig(env.Config)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		s, err := dashboard.New(dashboard.Options{Cache: env.Manager.GetCache(), Authenticator: &dashboard.TokenReviewer{Client: cs},
			Authorizer: &dashboard.AccessReviewer{Client: cs}, Discovery: dc})
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		go func() { _ = s.Start(ctx) }()
		srv := httptest.NewServer(s.Handler())
		defer srv.Close()
		get := func(token string) (int, string) {
			req, _ := http.NewRequest(http.MethodGet, srv.URL+"/capi", nil)
			req.Header.Set("Authorization", "Bearer "+token)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return 0, err.Error()
			}
			defer resp.Body.Close()
			b, _ := io.ReadAll(resp.Body)
			return resp.StatusCode, string(b)
		}
		NewWithT(t).Eventually(func(g Gomega) {
			code, body := get(capiReader)
			g.Expect(code).To(Equal(http.StatusOK), body)
			expectCAPIRows(g, body)
		}, 20*time.Second, 200*time.Millisecond).Should(Succeed())
		g := NewWithT(t)
		code, body := get(fleetReader)
		g.Expect(code).To(Equal(http.StatusOK), body)
		g.Expect(body).To(ContainSubstring("No Cluster API cluster that you may list"))
		g.Expect(row(body, "ready")).To(BeEmpty())
		code, _ = get("not-a-token")
		g.Expect(code).To(Equal(http.StatusUnauthorized))
	})

	t.Run("without Cluster API installed, the page says so", func(t *testing.T) {
		g := NewWithT(t)
		cp, err := controlplane.Start(controlplane.Options{Name: "dashboard-no-capi"})
		g.Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = cp.Stop() })
		get := browse(t, cp.Config)
		code, body := get("/capi")
		g.Expect(code).To(Equal(http.StatusOK), body)
		g.Expect(body).To(ContainSubstring("Cluster API is not installed on this cluster"))
		code, _ = get("/clusters")
		g.Expect(code).To(Equal(http.StatusOK), "the other pages are served as ever")
	})
}

// serviceAccount makes a ServiceAccount of the workspace bound to rules
// there, and returns a token of it.
func serviceAccount(t *testing.T, cs kubernetes.Interface, name string, rules []rbacv1.PolicyRule) string {
	t.Helper()
	g := NewWithT(t)
	ctx := t.Context()
	g.Expect(env.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: capiNS}})).To(Succeed())
	g.Expect(env.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: capiNS}, Rules: rules})).To(Succeed())
	g.Expect(env.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: capiNS},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: name, Namespace: capiNS}}})).To(Succeed())
	exp := int64(3600)
	tr, err := cs.CoreV1().ServiceAccounts(capiNS).CreateToken(ctx, name,
		&authnv1.TokenRequest{Spec: authnv1.TokenRequestSpec{ExpirationSeconds: &exp}}, metav1.CreateOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	return tr.Status.Token
}

func tokenConfig(token string) *rest.Config {
	cfg := rest.AnonymousClientConfig(env.Config)
	cfg.BearerToken = token
	return cfg
}
