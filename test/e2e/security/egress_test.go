package security_test

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleet "github.com/gitfleet/fleet/api/v1alpha1"
	"github.com/gitfleet/fleet/controllers"
	"github.com/gitfleet/fleet/internal/egress"
	"github.com/gitfleet/fleet/test/framework"
)

// deniedAddr stands for an internal service of the manager's network: the
// suite's manager allows loopback (its git server listens there) but is told
// to refuse this one address (--egress-deny-cidrs, suite_test.go).
const deniedAddr = "127.0.0.77"

// connCounter is a TCP listener that counts the connections made to it.
type connCounter struct {
	net.Listener
	n atomic.Int64
}

func countConnections(addr string) *connCounter {
	GinkgoHelper()
	l, err := net.Listen("tcp", addr)
	Expect(err).NotTo(HaveOccurred())
	c := &connCounter{Listener: l}
	DeferCleanup(l.Close)
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			c.n.Add(1)
			_ = conn.Close()
		}
	}()
	return c
}

var _ = Describe("Outbound destinations (footholds e and f)", func() {
	It("a tenant's GitRepo or HelmOp gets no connection to a loopback, link-local or denied address, directly or by redirect, and one fixed message", func() {
		ctx, ns := env.Ctx, "tenant-egress"
		tenant, err := framework.TenantClient(ctx, env.Admin, env.Upstream.Config, controllers.Scheme(), ns)
		Expect(err).NotTo(HaveOccurred())
		internal := countConnections(deniedAddr + ":0")
		open := "http://" + internal.Addr().String()
		closing, err := net.Listen("tcp", deniedAddr+":0")
		Expect(err).NotTo(HaveOccurred())
		closed := "http://" + closing.Addr().String()
		Expect(closing.Close()).To(Succeed())
		metadata := "http://169.254.169.254"
		var redirects atomic.Int64
		redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			redirects.Add(1)
			http.Redirect(w, r, open+r.URL.Path, http.StatusFound)
		}))
		DeferCleanup(redirector.Close)

		By("GitRepos whose repository, fleet.yaml chart or chart dependency is at such an address")
		gitRepos := map[string]map[string]string{
			"chart-open-port":   {"fleet.yaml": "helm:\n  chart: " + open + "/app-1.0.0.tgz\n"},
			"chart-closed-port": {"fleet.yaml": "helm:\n  chart: " + closed + "/app-1.0.0.tgz\n"},
			"chart-redirect":    {"fleet.yaml": "helm:\n  chart: " + redirector.URL + "/app-1.0.0.tgz\n"},
			"chart-metadata":    {"fleet.yaml": "helm:\n  chart: " + metadata + "/latest/meta-data/app-1.0.0.tgz\n"},
			"chart-repo":        {"fleet.yaml": "helm:\n  repo: " + open + "\n  chart: app\n"},
			"dependency": {"Chart.yaml": "apiVersion: v2\nname: app\nversion: 0.1.0\ndependencies:\n- name: dep\n  version: 1.0.0\n  repository: " + open + "\n",
				"templates/cm.yaml": configMap},
		}
		for name, files := range gitRepos {
			_, url := gitRepoAt("egress-"+name, files)
			Expect(tenant.Create(ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: fleet.GitRepoSpec{Repo: url, Branch: "main", PollingInterval: pollEvery(time.Hour)}})).To(Succeed())
		}
		repoURLs := map[string]string{"repo-open-port": open + "/repo", "repo-closed-port": closed + "/repo",
			"repo-redirect": redirector.URL + "/repo", "repo-metadata": metadata + "/repo"}
		for name, url := range repoURLs {
			Expect(tenant.Create(ctx, &fleet.GitRepo{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: fleet.GitRepoSpec{Repo: url, Branch: "main", PollingInterval: pollEvery(time.Hour)}})).To(Succeed())
			gitRepos[name] = nil
		}

		By("HelmOps whose chart repository, registry or chart URL is at such an address")
		helmOps := map[string]*fleet.HelmOptions{
			"op-repo-open-port":   {Repo: open, Chart: "app"},
			"op-repo-closed-port": {Repo: closed, Chart: "app"},
			"op-repo-redirect":    {Repo: redirector.URL, Chart: "app"},
			"op-chart-metadata":   {Chart: metadata + "/latest/meta-data/app-1.0.0.tgz"},
			"op-oci":              {Repo: "oci://" + internal.Addr().String() + "/charts/app", Version: "1.0.0"},
		}
		for name, h := range helmOps {
			op := &fleet.HelmOp{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
			op.Spec.Helm = h
			Expect(tenant.Create(ctx, op)).To(Succeed())
		}

		By("each is refused with the same message, which tells no address, port or open from closed")
		for name := range gitRepos {
			c := gitRepoCondition(tenant, ns, name, fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonDestinationRefused, 2*time.Minute)
			Expect(c.Message).To(Equal(egress.Message), name)
		}
		for name := range helmOps {
			c := helmOpCondition(tenant, ns, name, fleet.ConditionAccepted, metav1.ConditionFalse, fleet.ReasonDestinationRefused, 2*time.Minute)
			Expect(c.Message).To(Equal(egress.Message), name)
		}
		Expect(egress.Message).NotTo(ContainSubstring(deniedAddr))

		By("the internal service saw no connection, though the manager followed the allowed host to its redirect")
		Expect(internal.n.Load()).To(BeZero(), "the manager connected to the denied address")
		Expect(redirects.Load()).To(BeNumerically(">", 0), "the allowed redirector was not asked")
		bundles := &fleet.BundleList{}
		Expect(env.Admin.List(ctx, bundles, client.InNamespace(ns))).To(Succeed())
		Expect(bundles.Items).To(BeEmpty(), "a bundle was made from a refused destination")
	})
})
